# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout inspector's data: a bounded index of finished rollouts to search, and one rollout's
transcript turn by turn.

The index holds a small summary per record (reward, failure, attempts, ...), never the record:
records stay in the job journal (SQLite extracts the summary's fields; no record is parsed in Python
to index it) and are read from it when one is opened. It is filled lazily, when
the dashboard asks, from the batches' result lists and the journal (the rollout path pays nothing),
and it forgets what the job service forgot. `max_records` caps it: beyond it the oldest batches'
summaries are dropped first (their records are still in the journal: open them by job id).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import orjson

from prorl_gym.dashboard.live import failure_key
from prorl_gym.jobs.state import BatchView
from prorl_gym.wire.items import TOKEN_FIELDS, without_token_ids
from prorl_gym.wire.records import RolloutRecord

CHUNK = 500  # records read from the journal and summarised at a time
TRUNCATION_MARKS = ("[... output truncated", "[... truncated")  # what tools write where they cut output
GENERATED_COUNT = "generated_tokens"  # what a kept /run record's item says instead of its generation ids
NEVER_SENT = ("Error: unknown tool", "Error: the arguments")  # malformed calls the agent answered itself


@dataclass(slots=True)
class Summary:
    """One finished rollout of one batch, as the search lists it."""

    job_id: str
    batch_id: str
    row: int
    sample: int
    status: str
    reward: float | None  # None: failed (a failure is never a reward)
    failure_type: str | None
    failure_stage: str | None
    attempts: int
    turns: int
    host: str | None
    total_s: float | None
    stop_reason: str | None

    def wire(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


# What a summary reads of a record (Journal.fields: SQLite extracts them; the record is never parsed in Python)
SUMMARY_PATHS = [
    "$.reward",
    "$.failure.type",
    "$.failure.stage",
    "$.attempts",
    "$.num_turns",
    "$.host",
    "$.timings.total_s",
    "$.stop_reason",
]


def summarize(job_id: str, batch_id: str, position: int, group_size: int, status: str, values: list) -> Summary:
    reward, failure_type, failure_stage, attempts, turns, host, total_s, stop_reason = values
    return Summary(
        job_id=job_id,
        batch_id=batch_id,
        row=position // group_size,
        sample=position % group_size,
        status=status,
        reward=None if failure_type else reward,
        failure_type=failure_type,
        failure_stage=failure_stage,
        attempts=attempts if attempts is not None else 1,
        turns=turns or 0,
        host=host,
        total_s=total_s,
        stop_reason=stop_reason,
    )


RUN_BATCH = "run"  # the pseudo-batch of rollouts asked by POST /run (ng_collect_rollouts, NeMo RL): not journaled


def summarize_record(job_id: str, row: int, sample: int, record: RolloutRecord) -> Summary:
    failure = record.failure
    return Summary(
        job_id=job_id,
        batch_id=RUN_BATCH,
        row=row,
        sample=sample,
        status="completed" if failure is None else "failed",
        reward=None if failure else record.reward,
        failure_type=failure.type.value if failure else None,
        failure_stage=failure.stage.value if failure and failure.stage else None,
        attempts=record.attempts,
        turns=record.num_turns,
        host=record.host,
        total_s=record.timings.get("total_s"),
        stop_reason=record.stop_reason,
    )


class RecentRuns:
    """The last `keep` records of POST /run, without their token ids (a long SWE rollout's are tens of MB as
    Python lists; the inspector shows their counts): a shallow copy, no serialisation on the rollout path.
    Job ids "run/<n>"; a task's samples share a row (the row's task_id, else its prompt)."""

    def __init__(self, keep: int):
        self._records: deque[tuple[int, RolloutRecord]] = deque(maxlen=keep)
        self._next = 0

    def add(self, record: RolloutRecord) -> None:
        self._records.append((self._next, _without_token_ids(record)))
        self._next += 1

    def __len__(self) -> int:
        return len(self._records)

    def summaries(self) -> list[Summary]:
        """Oldest first."""
        rows: dict[str, int] = {}
        samples: dict[int, int] = {}
        out = []
        for n, record in self._records:
            row = rows.setdefault(_task_key(record), len(rows))
            samples[row] = samples.get(row, -1) + 1
            out.append(summarize_record(f"{RUN_BATCH}/{n}", row, samples[row], record))
        return out

    def get(self, job_id: str) -> RolloutRecord | None:
        prefix, _, n = job_id.partition("/")
        if prefix != RUN_BATCH or not n.isdigit() or not self._records:
            return None
        first = self._records[0][0]
        k = int(n) - first
        return self._records[k][1] if 0 <= k < len(self._records) else None


def _without_token_ids(record: RolloutRecord) -> RolloutRecord:
    """The record with each transcript item's token id lists left out (the generated ones counted)."""
    output = (record.response or {}).get("output")
    if not output:
        return record
    items = []
    for item in output:
        if isinstance(item, dict) and TOKEN_FIELDS & item.keys():
            item = without_token_ids(item) | {GENERATED_COUNT: len(item.get("generation_token_ids") or ())}
        items.append(item)
    return record.model_copy(update={"response": record.response | {"output": items}})


def _task_key(record: RolloutRecord) -> str:
    extra = record.model_extra or {}
    if extra.get("task_id"):
        return str(extra["task_id"])
    params = extra.get("responses_create_params") or {}
    return orjson.dumps(params.get("input"), option=orjson.OPT_SORT_KEYS).decode()[:2000]


@dataclass
class Query:
    batch: str | None = None
    job: str | None = None  # a substring of the job id
    row: int | None = None
    environment: str | None = None  # this agent's environment: anything else matches nothing
    failure: str | None = None  # a failure type, "any" (every failed one) or "none" (the usable ones)
    reward_min: float | None = None
    reward_max: float | None = None

    def matches(self, s: Summary) -> bool:
        if self.job is not None and self.job not in s.job_id:
            return False
        if self.row is not None and s.row != self.row:
            return False
        if self.failure == "any":
            if s.failure_type is None:
                return False
        elif self.failure == "none":
            if s.failure_type is not None:
                return False
        elif self.failure is not None and s.failure_type != self.failure:
            return False
        if self.reward_min is not None and (s.reward is None or s.reward < self.reward_min):
            return False
        return not (self.reward_max is not None and (s.reward is None or s.reward > self.reward_max))


class RolloutIndex:
    def __init__(
        self,
        batches: Callable[[], list[BatchView]],
        fields: Callable[[list[str], list[str]], Awaitable[dict[str, list]]],  # Journal.fields
        environment: str,
        max_records: int = 100_000,
        runs: RecentRuns | None = None,
    ):
        self._batches, self._fields, self.environment = batches, fields, environment
        self.max_records = max_records
        self.runs = runs if runs is not None else RecentRuns(0)
        self._by_batch: dict[str, list[Summary]] = {}  # in stream order; insertion order = oldest batch first
        self._positions: dict[str, dict[str, int]] = {}  # batch id -> job id -> its place in the batch
        self._dropped: set[str] = set()  # batches whose summaries the cap dropped (not indexed again)
        self._size = 0
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return self._size + len(self.runs)

    async def refresh(self) -> None:
        """Summarise what finished since the last call; forget the batches the job service forgot."""
        async with self._lock:
            views = self._batches()
            held = {view.id for view in views}
            for gone in [b for b in self._by_batch if b not in held]:
                self._size -= len(self._by_batch.pop(gone))
                self._positions.pop(gone, None)
            self._dropped &= held
            for view in views:
                if view.id in self._dropped:
                    continue
                summaries = self._by_batch.setdefault(view.id, [])
                while len(summaries) < len(view.results):
                    new = view.results[len(summaries) : len(summaries) + CHUNK]
                    values = await self._fields([job_id for job_id, _ in new], SUMMARY_PATHS)
                    positions = self._positions.get(view.id)
                    if positions is None:
                        positions = self._positions[view.id] = {j: k for k, j in enumerate(view.job_ids)}
                    added = self._summaries(view, new, values, positions)
                    summaries.extend(added)
                    self._size += len(added)
                    if len(added) < len(new):  # a record gone meanwhile (the batch was forgotten): next time
                        break
            self._cap()

    @staticmethod
    def _summaries(view: BatchView, new: list, values: dict[str, list], positions: dict[str, int]) -> list[Summary]:
        out = []
        for job_id, status in new:
            if (found := values.get(job_id)) is None:
                break
            out.append(summarize(job_id, view.id, positions.get(job_id, 0), view.group_size, status, found))
        return out

    def _cap(self) -> None:
        while self._size > self.max_records and len(self._by_batch) > 1:
            oldest = next(iter(self._by_batch))
            self._size -= len(self._by_batch.pop(oldest))
            self._positions.pop(oldest, None)
            self._dropped.add(oldest)

    def search(self, query: Query, offset: int = 0, limit: int = 50) -> tuple[int, list[Summary]]:
        """(how many match, the page of them from `offset`), newest batch first, each batch's newest first."""
        if query.environment not in (None, "", self.environment):
            return 0, []
        total, page = 0, []
        for summary in self._candidates(query.batch):
            if query.matches(summary):
                if offset <= total < offset + limit:
                    page.append(summary)
                total += 1
        return total, page

    def _candidates(self, batch: str | None) -> Iterator[Summary]:
        if batch in (None, RUN_BATCH) and len(self.runs):
            yield from reversed(self.runs.summaries())
        if batch == RUN_BATCH:
            return
        batches = [batch] if batch else list(reversed(self._by_batch))
        for batch_id in batches:
            yield from reversed(self._by_batch.get(batch_id, ()))

    def failures(self) -> dict[str, int]:
        """Failed rollouts held, by "<stage>/<type>"."""
        counts: dict[str, int] = {}
        for summaries in (*self._by_batch.values(), self.runs.summaries() if len(self.runs) else ()):
            for s in summaries:
                if s.failure_type:
                    key = failure_key(s.failure_stage, s.failure_type)
                    counts[key] = counts.get(key, 0) + 1
        return counts


# ---------------------------------------------------------------------------- one rollout, turn by turn


def turns(record: dict, spans: list[dict] | None = None) -> list[dict]:
    """The transcript as turns: each the policy's messages and tool calls (arguments, output, whether the
    output was truncated, the call's time where a trace was kept) and the turn's generated tokens."""
    output = ((record.get("response") or {}).get("output")) or []
    outputs = {
        item.get("call_id"): item.get("output") for item in output if item.get("type") == "function_call_output"
    }
    spans = spans or []
    if runs := [s for s in spans if s["name"] == "RUN"]:  # retried: the record's transcript is the last attempt's
        last = max(runs, key=lambda s: s["start_ns"])["span_id"]
        spans = [s for s in spans if s.get("parent_id") == last]
    policy_spans = [s for s in spans if s["name"] == "policy call"]
    tool_spans = [s for s in spans if s["name"] == "tool call"]
    result: list[dict] = []
    current: dict = {}
    new_turn = True  # the next item the policy wrote starts a turn (at first, and after tool outputs)
    for item in output:
        kind = item.get("type")
        if kind == "function_call_output":
            new_turn = True
            continue
        if new_turn:
            new_turn = False
            span = policy_spans[len(result)] if len(result) < len(policy_spans) else None
            current = {
                "turn": len(result) + 1,
                "messages": [],
                "reasoning": [],
                "tool_calls": [],
                "policy_s": span["duration_s"] if span else None,
                "tokens": span["attributes"].get("prorl.output_tokens") if span else None,
                "_ids": 0,
            }
            result.append(current)
        current["_ids"] += item.get(GENERATED_COUNT) or len(item.get("generation_token_ids") or ())
        if kind == "message":
            current["messages"].append(_text(item.get("content")))
        elif kind == "reasoning":
            current["reasoning"].append(_text(item.get("summary") or item.get("content")))
        elif kind == "function_call":
            text = outputs.get(item.get("call_id"))
            text = _text(text) if text is not None else None
            duration = None
            if text is None or not text.startswith(NEVER_SENT):  # sent to the resources server: it has a span
                for n, span in enumerate(tool_spans):
                    if span["attributes"].get("prorl.tool") == item.get("name"):
                        duration = tool_spans.pop(n)["duration_s"]
                        break
            current["tool_calls"].append(
                {
                    "name": item.get("name"),
                    "arguments": item.get("arguments"),
                    "output": text,
                    "truncated": bool(text) and any(mark in text for mark in TRUNCATION_MARKS),
                    "duration_s": duration,
                }
            )
    for turn in result:
        ids = turn.pop("_ids")
        if ids:  # the policy's own token ids: exact
            turn["tokens"] = ids
    return result


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)
