# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""mini-swe-agent, unchanged, as the SWE environment's agent, on a real stack: ng_run serving the SWE
resources server, the harness agents (responses_api_agents/prorl_agent/configs/swe_mini_swe_agent.yaml: in the
agent's process; swe_mini_swe_agent_sandbox.yaml: its command line inside each rollout's sandbox) and the
model server in token-in/token-out mode with Qwen3's real tokenizer; ng_collect_rollouts collecting.
The scripted policy (the stand-in for a GPU model) plays each task's recorded actions in the
harness's own action format (its bash tool; its submission command, as its prompt says), so gold
must score 1.0 and wrong 0.0, graded by the SWE verifier on the sandbox's final state."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.request

import pytest

from prorl_gym.capture import CaptureRecord, export, tree_from_export
from prorl_gym.client import ProRLClient, agent_url
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import collected_records
from prorl_gym.testing import built_harness_envs, harness_stack, traversable_dir
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.tokens.template import text_of
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3

try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)
pytest.importorskip("minisweagent", reason="make setup installs mini-swe-agent (the harness's requirements.txt)")

SWE = environment("swe")
# how each runs -> its agent: mini-swe-agent in the agent's process and inside the sandbox (its command
# line); CLI agents from npm inside the sandbox: Claude Code (Anthropic Messages, streamed), the Codex CLI
# (the Responses API, streamed) and OpenCode (chat completions, streamed), of NeMo Gym 0.7's harness catalogue
AGENTS = {
    "agent": "swe_mini_swe_agent",
    "sandbox": "swe_mini_swe_agent_sandbox",
    "claude_code": "swe_claude_code",
    "codex": "swe_codex",
    "opencode": "swe_opencode",
}
NPM = ("claude_code", "codex", "opencode")
PLACEMENTS = [
    pytest.param(p, marks=pytest.mark.skip(reason="make setup builds it with npm"))
    if p in NPM and p not in built_harness_envs()
    else p
    for p in sorted(AGENTS)
]
TASKS = 2  # of the example's five
# A stack of every harness agent, and a CLI harness's start (OpenCode's ~20 s) under a loaded machine's CPU:
# the first test of each harness collects its rollouts
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    tmp = tmp_path_factory.mktemp("harness")
    sandbox_root = traversable_dir("prorl-harness-")
    timeouts = [
        f"+{agent}.responses_api_agents.prorl_agent.limits.policy_call_timeout_s=30" for agent in AGENTS.values()
    ]
    with harness_stack(sandbox_root, tmp / "logs", timeouts, ray_cluster) as stack:
        stack.tmp = tmp
        yield stack
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    shutil.rmtree(sandbox_root)


@pytest.fixture(scope="module", params=PLACEMENTS)
def records(request, stack) -> dict[str, list[dict]]:
    agent, rows = AGENTS[request.param], []
    for mode in ("gold", "wrong"):
        for row in read_jsonl(SWE.example)[:TASKS]:
            row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
            rows.append(row)
    inputs, output = stack.tmp / f"rows-{agent}.jsonl", stack.tmp / f"{agent}.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stack.collect(agent, inputs, output)
    by_mode: dict[str, list[dict]] = {}
    for record in collected_records(output):
        by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record)
    return by_mode


# how each ends: its stop reason (its own word for it), the end of what it printed (in the sandbox), what
# one of its own user messages around the task starts with, the protocol it speaks, whether it keeps its history as generated
EXPECTED = {
    "agent": ("submitted", None, "Please solve this issue", "chat_completions", True),
    "sandbox": (
        "submitted",
        "prorl-harness-exit-status: Submitted",
        "Please solve this issue",
        "chat_completions",
        True,
    ),
    "claude_code": ("success", '"subtype":"success"', "<system-reminder>", "anthropic_messages", False),
    # the Codex CLI sends its environment context first, or the repository's AGENTS.md where it has one
    "codex": (
        "completed",
        '"type":"turn.completed"',
        ("<environment_context>", "# AGENTS.md instructions for "),
        "responses",
        True,
    ),
    "opencode": ("stop", '"reason":"stop"', '"', "chat_completions", True),
}


def test_a_harness_inside_the_sandbox_says_how_it_ended_in_the_record(request, records):
    _, printed, _, _, _ = EXPECTED[request.node.callspec.params["records"]]
    outputs = [r["capture"]["harness_output"] for rs in records.values() for r in rs]
    if printed is None:  # in the agent's process: nothing printed to keep
        assert outputs == [""] * len(outputs)
    else:  # what its command line printed, last its own exit status
        assert all(printed in o[-2000:] for o in outputs), outputs


def test_gold_in_the_harness_scores_one_and_wrong_scores_zero(request, records):
    stop_reason, _, _, _, _ = EXPECTED[request.node.callspec.params["records"]]
    assert [r["failure"] for rs in records.values() for r in rs] == [None] * 2 * TASKS
    assert [r["reward"] for r in records["gold"]] == [1.0] * TASKS
    assert [r["reward"] for r in records["wrong"]] == [0.0] * TASKS
    assert all(r["stop_reason"] == stop_reason and r["patch_bytes"] > 0 for r in records["gold"])


def test_every_call_of_the_harness_is_captured_with_the_ids_the_policy_sampled(request, stack, records):
    _, _, prompt, protocol, extends_all = EXPECTED[request.node.callspec.params["records"]]
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.policy_port}/sampled", timeout=10) as response:
        sampled = {tuple(s["ids"]) for s in json.load(response)}
    for record in (r for rs in records.values() for r in rs):
        capture = CaptureRecord.model_validate(record["capture"])
        calls = capture.calls
        assert len(calls) == record["num_turns"] >= 2
        exported = export(capture.tree)
        if extends_all:  # it sends its whole history every call, as generated: each call extends the one before
            assert [c.extends for c in calls] == [c.parent for c in calls] == [None, *range(len(calls) - 1)]
            assert len(exported.branches) == 1
        else:  # where it rewrote its history (Claude Code drops a leading `cd <cwd> &&` from a command), the call
            # was rendered whole, and its prompt leaves the tree where the edit is: a branch, never a new root
            assert all(c.extends in (None, c.index - 1) for c in calls)
            assert all(c.parent is not None and c.parent < c.index for c in calls[1:])
        generated = [tuple(capture.generation(c.index)[0]) for c in calls]
        assert set(generated) <= sampled and all(generated)  # every call's ids as sampled, never a re-encoding
        assert sum(sum(b.loss_mask) for b in exported.branches) == exported.generated_tokens == capture.output_tokens
        assert all(token_ids_contiguous(b.output) is True for b in exported.branches)
        assert tree_from_export(exported) == capture.tree
        assert record["token_ids_contiguous"] is True  # the record's transcript: the last call's branch
        kinds = {
            "rendered": sum(c.extends is None for c in calls),
            "extended": sum(c.extends is not None for c in calls),
        }
        assert record["token_prompts"] == {k: n for k, n in kinds.items() if n}
        users = [text_of(m["content"]) for m in calls[0].messages if m["role"] == "user"]
        assert any(u.startswith(prompt) for u in users), users  # its own prompt around the task, as sent
        assert {c.protocol for c in calls} == {protocol}


def test_the_job_api_runs_a_harness_agent_as_any_other(stack):
    """Rows handed to the in-sandbox harness agent's job API come back as the same records, streamed."""
    rows = read_jsonl(SWE.example)[:1]
    rows[0]["responses_create_params"]["metadata"] = {"scripted_mode": "gold"}

    async def submit_and_stream() -> list:
        url = await agent_url(f"http://127.0.0.1:{stack.head_port}", AGENTS["sandbox"])
        async with ProRLClient(url) as client:
            batch = await client.submit(rows, samples_per_row=2)
            return [record async for record in client.stream(batch.batch_id)]

    records = asyncio.run(submit_and_stream())
    assert [(r.reward, r.failure, r.stop_reason) for r in records] == [(1.0, None, "submitted")] * 2
    assert all(r.token_ids_contiguous is True and r.capture["calls"][-1]["node"] is not None for r in records)
