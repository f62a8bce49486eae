# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout inspector's index (prorl_gym/dashboard/index.py): search and pages, incremental and
bounded filling from the journal, and a transcript turn by turn."""

from __future__ import annotations

import orjson

from prorl_gym.dashboard.index import SUMMARY_PATHS, Query, RolloutIndex, turns
from prorl_gym.jobs.journal import Journal as RealJournal
from prorl_gym.jobs.journal import StreamOffset
from prorl_gym.jobs.state import BatchView


def record(k: int) -> str:
    """Job k's record: every 5th failed (a RUN timeout after retries), the rest alternately right and wrong."""
    failed = k % 5 == 4
    return orjson.dumps(
        {
            "reward": 0.0 if failed else float(k % 2),
            "failure": {"stage": "run", "type": "timeout", "message": "slow"} if failed else None,
            "attempts": 2 if failed else 1,
            "num_turns": 3,
            "host": f"node-{k % 3}",
            "timings": {"total_s": 1.5},
        }
    ).decode()


class Journal:
    def __init__(self):
        self.texts: dict[str, str] = {}
        self.asked: list[int] = []

    async def fields(self, job_ids: list[str], paths: list[str]) -> dict[str, list]:
        """As Journal.fields: the values at `paths` ($.a.b) of each finished job's record."""
        self.asked.append(len(job_ids))
        return {j: [at(orjson.loads(self.texts[j]), p) for p in paths] for j in job_ids if j in self.texts}


def at(value, path: str):
    for key in path.removeprefix("$.").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def batch(batch_id: str, n: int, journal: Journal, finished: int | None = None, group: int = 4) -> BatchView:
    job_ids = [f"{batch_id}/{k // group}/{k % group}" for k in range(n)]
    for k, job_id in enumerate(job_ids):
        journal.texts[job_id] = record(k)
    done = job_ids[: n if finished is None else finished]
    results = [(j, "failed" if k % 5 == 4 else "completed") for k, j in enumerate(done)]
    return BatchView(batch_id, job_ids, results, group, 0, len(done) == n, None)


async def test_search_filters_and_pages_newest_first():
    journal = Journal()
    views = [batch("a", 20, journal), batch("b", 20, journal)]
    index = RolloutIndex(lambda: views, journal.fields, "math")
    await index.refresh()
    total, page = index.search(Query(), offset=0, limit=7)
    assert total == 40 and [s.job_id for s in page[:2]] == ["b/4/3", "b/4/2"]  # newest batch, newest result
    _, second = index.search(Query(), offset=7, limit=7)
    assert not {s.job_id for s in page} & {s.job_id for s in second}
    failed_total, failed = index.search(Query(batch="a", failure="any"), limit=100)
    assert failed_total == 4 and all(s.failure_type == "timeout" and s.attempts == 2 for s in failed)
    assert all(s.reward is None for s in failed), "a failure is never listed as a reward"
    assert index.search(Query(failure="timeout"))[0] == 8 and index.search(Query(failure="eval_error"))[0] == 0
    assert index.search(Query(failure="none", reward_min=1.0))[0] == 16
    assert index.search(Query(job="a/2/"))[0] == 4 and index.search(Query(batch="a", row=2))[0] == 4
    assert index.search(Query(environment="math"))[0] == 40 and index.search(Query(environment="swe"))[0] == 0
    assert index.failures() == {"run/timeout": 8}


async def test_filling_is_incremental_and_forgets_what_the_job_service_forgot():
    journal = Journal()
    views = [batch("a", 12, journal, finished=5)]
    index = RolloutIndex(lambda: views, journal.fields, "math")
    await index.refresh()
    assert len(index) == 5 and journal.asked == [5]
    views[0] = batch("a", 12, journal, finished=12)
    await index.refresh()
    await index.refresh()  # nothing new: the journal is not asked
    assert len(index) == 12 and journal.asked == [5, 7]
    views.clear()  # acknowledged or expired
    await index.refresh()
    assert len(index) == 0 and index.search(Query())[0] == 0


async def test_the_index_is_capped_by_dropping_the_oldest_batches_for_good():
    journal = Journal()
    views = [batch(name, 10, journal) for name in ("a", "b", "c")]
    index = RolloutIndex(lambda: views, journal.fields, "math", max_records=25)
    await index.refresh()
    assert len(index) == 20 and index.search(Query(batch="a"))[0] == 0
    asked = len(journal.asked)
    await index.refresh()
    assert len(journal.asked) == asked, "a dropped batch is not read again"


async def test_ten_thousand_records_in_one_batch_are_searched_a_page_at_a_time():
    journal = Journal()
    views = [batch("big", 10_000, journal)]
    index = RolloutIndex(lambda: views, journal.fields, "math")
    await index.refresh()
    assert max(journal.asked) <= 500, "read from the journal in chunks"
    total, page = index.search(Query(batch="big", failure="any"), offset=1950, limit=50)
    assert total == 2000 and len(page) == 50 and page[-1].job_id == "big/1/0"  # job 4: the oldest failure


def test_a_transcript_is_split_into_turns_with_truncation_timings_and_tokens():
    output = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "let me look"}]},
        {"type": "function_call", "name": "bash", "arguments": '{"command": "ls"}', "call_id": "c1"},
        {"type": "function_call", "name": "nope", "arguments": "{}", "call_id": "c2", "generation_token_ids": [1, 2]},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": "a\n[... output truncated: 9 bytes omitted ...]\n",
        },
        {"type": "function_call_output", "call_id": "c2", "output": "Error: unknown tool 'nope'"},
        {"type": "function_call", "name": "bash", "arguments": '{"command": "pwd"}', "call_id": "c3"},
        {"type": "function_call_output", "call_id": "c3", "output": "/w"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    spans = [
        {"name": "policy call", "duration_s": 0.5, "attributes": {"prorl.output_tokens": 11}},
        {"name": "tool call", "duration_s": 0.01, "attributes": {"prorl.tool": "bash"}},
        {"name": "policy call", "duration_s": 0.25, "attributes": {"prorl.output_tokens": 4}},
        {"name": "tool call", "duration_s": 0.02, "attributes": {"prorl.tool": "bash"}},
        {"name": "policy call", "duration_s": 0.125, "attributes": {}},
    ]
    got = turns({"response": {"output": output}}, spans)
    assert [t["turn"] for t in got] == [1, 2, 3]
    first = got[0]
    assert first["messages"] == ["let me look"] and first["policy_s"] == 0.5
    assert first["tokens"] == 2, "the policy's own token ids win over the usage count"
    bash, nope = first["tool_calls"]
    assert bash["truncated"] and bash["duration_s"] == 0.01 and bash["arguments"] == '{"command": "ls"}'
    assert not nope["truncated"] and nope["duration_s"] is None, "a call the agent refused itself has no span"
    assert got[1]["tool_calls"][0]["duration_s"] == 0.02 and got[1]["tokens"] == 4
    assert got[2]["messages"] == ["done"] and got[2]["tool_calls"] == [] and got[2]["tokens"] is None
    assert turns({"response": None}) == []


def test_a_retried_rollouts_call_times_are_its_last_attempts():
    output = [
        {"type": "function_call", "name": "bash", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    spans = [
        {"name": "RUN", "span_id": "r1", "parent_id": "x", "start_ns": 1, "duration_s": 9.0, "attributes": {}},
        {"name": "policy call", "parent_id": "r1", "start_ns": 2, "duration_s": 5.0, "attributes": {}},
        {"name": "RUN", "span_id": "r2", "parent_id": "x", "start_ns": 10, "duration_s": 1.0, "attributes": {}},
        {"name": "policy call", "parent_id": "r2", "start_ns": 11, "duration_s": 0.5, "attributes": {}},
        {
            "name": "tool call",
            "parent_id": "r2",
            "start_ns": 12,
            "duration_s": 0.1,
            "attributes": {"prorl.tool": "bash"},
        },
    ]
    (turn,) = turns({"response": {"output": output}}, spans)
    assert turn["policy_s"] == 0.5 and turn["tool_calls"][0]["duration_s"] == 0.1


async def test_the_journal_extracts_the_summarys_fields_without_python_parsing_the_record(tmp_path):
    journal = RealJournal(tmp_path / "agent.sqlite")
    await journal.open()
    try:
        await journal.add_batch("b", ["b/0/0", "b/0/1", "b/1/0"], None, [(j, "f", "{}") for j in ("b/0/0", "b/0/1")])
        await journal.finish_job("b/0/0", "failed", record(4), [StreamOffset("b", 0, False)])
        got = await journal.fields(["b/0/0", "b/0/1", "nope"], SUMMARY_PATHS)
        assert list(got) == ["b/0/0"], "only finished jobs"
        assert got["b/0/0"] == [0.0, "timeout", "run", 2, 3, "node-1", 1.5, None]
        assert await journal.fields(["b/0/0"], ["$.host"]) == {"b/0/0": ["node-1"]}
    finally:
        await journal.close()
