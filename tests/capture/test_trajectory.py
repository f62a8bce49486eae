# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Which call extends which, where each goes in the token tree, how roots are linked, and the
transcript (no I/O: replies written here)."""

from __future__ import annotations

import pytest
from nemo_gym.openai_utils import NeMoGymChatCompletionCreateParamsNonStreaming
from pydantic import ValidationError

from prorl_gym.capture import CaptureLimits, CaptureRefused, Trajectory, export
from prorl_gym.tokens.contiguity import token_ids_contiguous

SYSTEM = {"role": "system", "content": "be brief"}
USER = {"role": "user", "content": "2+2?"}


def completion(text: str, prompt: list[int], generated: list[int]) -> dict:
    message = {
        "role": "assistant",
        "content": text,
        "prompt_token_ids": prompt,
        "generation_token_ids": generated,
        "generation_log_probs": [-0.1] * len(generated),
    }
    return {"id": "c", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def call(t: Trajectory, messages: list[dict], reply: dict) -> dict:
    t.admit()
    body, extends = t.prepare({"model": "m", "messages": messages, "temperature": 1.0})
    return t.add(body, extends, reply, 0.01)


def test_a_reply_sent_back_as_the_client_returned_it_is_matched_and_carries_its_ids_again():
    t = Trajectory()
    first = call(t, [SYSTEM, USER], completion("4", [1, 2, 3], [4, 5]))["choices"][0]["message"]
    assert first == {"role": "assistant", "content": "4"}  # no ids for the harness
    echoed = first | {"refusal": None, "tool_calls": [], "function_call": None}  # an SDK's own fields
    body, extends = t.prepare(
        {"model": "m", "messages": [SYSTEM, USER, echoed, {"role": "user", "content": "and 3+3?"}]}
    )
    assert extends == 0 and body["messages"][2]["generation_token_ids"] == [4, 5]
    assert body["messages"][2]["prompt_token_ids"] == [1, 2, 3]


def test_a_client_librarys_own_fields_are_not_forwarded_and_nemo_gym_accepts_the_call():
    """litellm (mini-swe-agent's client) sends its reply back with fields of its own, and a model server's
    reply may carry `routed_experts: null`: NeMo Gym 0.7's model servers refuse any field a message's role
    lacks (422), so the call is forwarded with the role's fields only, the reply's ids put back."""
    t = Trajectory()
    first = call(t, [SYSTEM, USER], completion("4", [1, 2, 3], [4, 5]))["choices"][0]["message"]
    litellm = {"provider_specific_fields": None, "annotations": None, "routed_experts": None, "reasoning_content": ""}
    user = USER | {"provider_specific_fields": {"cache": 1}}
    body, extends = t.prepare({"model": "m", "messages": [SYSTEM, user, first | litellm, USER]})
    assert extends == 0
    assert body["messages"][1] == USER and body["messages"][2] == first | {
        "reasoning_content": "",
        "prompt_token_ids": [1, 2, 3],
        "generation_token_ids": [4, 5],
        "generation_log_probs": [-0.1, -0.1],
    }
    NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(body)  # as the model server validates it
    with pytest.raises(ValidationError, match="provider_specific_fields"):
        NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(
            {"model": "m", "messages": [SYSTEM, user, first | litellm, USER]}
        )


def test_retries_and_rewrites_are_branches_of_one_tree():
    t = Trajectory()
    reply = call(t, [SYSTEM, USER], completion("4", [1, 2], [3]))["choices"][0]["message"]
    follow = [SYSTEM, USER, reply, {"role": "user", "content": "sure?"}]
    call(t, follow, completion("yes", [1, 2, 3, 9], [5]))
    call(t, follow, completion("yes!", [1, 2, 3, 9], [6]))  # the same call again (a harness's retry)
    call(t, [SYSTEM, {"role": "user", "content": "summary: 4"}], completion("ok", [1, 7], [8]))
    record = t.record()
    assert [c.extends for c in record.calls] == [None, 0, 0, None]  # whose ids went back on its history
    assert [c.parent for c in record.calls] == [None, 0, 0, None]  # whose generated tokens it shares
    assert [c.shared_tokens for c in record.calls] == [0, 3, 4, 1]
    assert [(c.prompt_tokens, c.generated_tokens) for c in record.calls] == [(2, 1), (4, 1), (4, 1), (2, 1)]
    exported = export(record.tree)
    assert len(exported.branches) == 3 and exported.generated_tokens == record.output_tokens == 4
    assert not [c for c in record.calls if "generation_token_ids" in c.reply]  # ids are in the tree only


def test_a_change_of_tools_or_template_options_renders_whole_and_sampling_does_not():
    t = Trajectory()
    tools = [{"type": "function", "function": {"name": "python", "parameters": {"type": "object"}}}]
    t.admit()
    body, _ = t.prepare({"messages": [USER], "tools": tools, "temperature": 1.0})
    reply = t.add(body, None, completion("4", [1, 2], [3]), 0.01)["choices"][0]["message"]
    history = [USER, reply, {"role": "user", "content": "and 3+3?"}]
    more = [*tools, {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    for changed, extends in [
        ({"tools": tools, "temperature": 0.2, "max_tokens": 7}, 0),  # sampling and limits: the prompt is the same
        ({"tools": more}, None),  # another tool offered: the old ids hold the old tool list
        ({"tools": []}, None),
        ({"tools": tools, "chat_template_kwargs": {"enable_thinking": False}}, None),
        ({"tools": tools, "model": "another"}, None),
    ]:
        body, got = t.prepare({"messages": history, **changed})
        assert got == extends, changed
        assert ("prompt_token_ids" in body["messages"][1]) == (extends is not None)


def test_a_subagent_and_a_compaction_are_roots_linked_to_where_they_came_from():
    t = Trajectory()
    task = "Find every caller of parse_header and list the files."
    spawn = {"id": "call_1", "type": "function", "function": {"name": "task", "arguments": f'{{"prompt": "{task}"}}'}}
    main = completion("", [1, 2], [3, 4]) | {}
    main["choices"][0]["message"]["tool_calls"] = [spawn]
    reply = call(t, [SYSTEM, USER], main)["choices"][0]["message"]
    call(
        t,
        [{"role": "system", "content": "you are a subagent"}, {"role": "user", "content": task}],
        completion("Found 3 callers: a.py, b.py, c.py.", [20, 21], [22]),
    )
    history = [SYSTEM, USER, reply, {"role": "tool", "tool_call_id": "call_1", "content": "a.py, b.py, c.py"}]
    summary = "The callers of parse_header are in a.py, b.py and c.py."
    call(t, [*history, {"role": "user", "content": "Summarise."}], completion(summary, [1, 2, 3, 4, 5], [6]))
    compacted = [SYSTEM, {"role": "user", "content": f"2+2?\nSummary of the work so far:\n{summary}"}]
    call(t, compacted, completion("ok", [1, 2, 7], [8]))
    record = t.record()
    assert [c.parent for c in record.calls] == [None, None, 0, None]
    assert record.calls[1].link.model_dump() == {"kind": "subagent", "call": 0, "tool_call_id": "call_1"}
    assert record.calls[2].link is None  # not a root: it continues call 0's conversation
    assert record.calls[3].link.model_dump() == {"kind": "compaction", "call": 2, "tool_call_id": None}
    assert record.calls[0].link is None


def test_the_transcript_is_the_last_calls_branch_with_ids_on_every_reply_it_holds_whole():
    t = Trajectory()
    first = call(t, [SYSTEM, USER], completion("4", [1, 2], [3, 4]))["choices"][0]["message"]
    second = call(
        t, [SYSTEM, USER, first, {"role": "user", "content": "sure?"}], completion("yes", [1, 2, 3, 4, 5], [6])
    )
    second = second["choices"][0]["message"]
    # the harness edits its first reply (as Claude Code drops a `cd` from a command): rendered whole, the
    # edit re-tokenized; the tree shares the prompt and the first token of the first reply
    edited = [SYSTEM, USER, first | {"content": "4."}, {"role": "user", "content": "sure?"}, second]
    call(t, [*edited, {"role": "user", "content": "ok"}], completion("done", [1, 2, 3, 9, 5, 6, 7], [10]))
    record = t.record()
    assert [c.extends for c in record.calls] == [None, 0, None] and record.calls[2].parent == 0
    given, items = record.transcript()
    assert given == [SYSTEM, USER]
    with_ids = [i for i in items if "generation_token_ids" in i]
    # the first reply is only partly on this branch: text, its tokens in the prompt of the last
    assert [i["generation_token_ids"] for i in with_ids] == [[10]]
    assert with_ids[-1]["prompt_token_ids"] == [1, 2, 3, 9, 5, 6, 7]
    assert token_ids_contiguous(items) is True
    whole = Trajectory()
    reply = call(whole, [USER], completion("4", [1], [2]))["choices"][0]["message"]
    call(whole, [USER, reply, {"role": "user", "content": "and?"}], completion("5", [1, 2, 3], [4]))
    _, items = whole.record().transcript()
    assert [(i.get("prompt_token_ids"), i.get("generation_token_ids")) for i in items if "prompt_token_ids" in i] == [
        ([1], [2]),
        ([1, 2, 3], [4]),
    ]


def test_a_history_that_differs_anywhere_before_the_reply_extends_nothing():
    t = Trajectory()
    reply = call(t, [SYSTEM, USER], completion("4", [1, 2], [3]))["choices"][0]["message"]
    edited = [{"role": "system", "content": "be very brief"}, USER, reply, {"role": "user", "content": "?"}]
    body, extends = t.prepare({"messages": edited})
    assert extends is None and "prompt_token_ids" not in body["messages"][2]


def test_limits_and_the_end():
    t = Trajectory(CaptureLimits(max_calls=1))
    call(t, [USER], completion("4", [1], [2]))
    with pytest.raises(CaptureRefused, match="1 policy calls") as refused:
        t.admit()
    assert refused.value.status == 403 and t.record().stopped
    t.ended = True
    with pytest.raises(CaptureRefused, match="ended") as ended:
        t.admit()
    assert ended.value.status == 410
    with pytest.raises(ValueError):
        CaptureLimits(max_calls=0)


def test_a_reply_whose_reasoning_the_client_moved_out_or_dropped_still_extends():
    # litellm (mini-swe-agent's client) hands back "<think>..</think>text" as reasoning_content + text
    t = Trajectory()
    call(t, [USER], completion("<think>add them</think>It is 4.\n", [1], [2]))
    moved = {"role": "assistant", "content": "It is 4.\n", "reasoning_content": "add them"}
    dropped = {"role": "assistant", "content": "It is 4."}
    for echoed in (moved, dropped):
        _, extends = t.prepare({"model": "m", "messages": [USER, echoed, {"role": "user", "content": "and 3+3?"}]})
        assert extends == 0


async def test_the_gateway_keeps_a_bounded_number_of_captures(monkeypatch):
    from prorl_gym.capture import gateway as module

    monkeypatch.setattr(module, "OPEN_KEPT", 3)
    gateway = module.CaptureGateway(client=None, model_server="model")
    keys = [gateway.open() for _ in range(5)]
    assert len(gateway) == 3 and gateway.record(keys[0]).calls == []  # the oldest two were ended, not lost
    with pytest.raises(CaptureRefused) as refused:
        await gateway.chat_completions(keys[0], {"messages": [USER]})
    assert refused.value.status == 410


def test_a_call_asks_for_no_more_output_than_the_rollout_has_left():
    t = Trajectory(CaptureLimits(max_output_tokens=10))
    body, _ = t.prepare({"messages": [USER], "max_tokens": 128_000})  # Claude Code asks for 32k-128k
    assert body["max_tokens"] == 10
    call(t, [USER], completion("4", [1], [2, 3, 4]))
    body, _ = t.prepare({"messages": [USER], "max_completion_tokens": 5})
    assert body["max_tokens"] == 5 and "max_completion_tokens" not in body
    body, _ = t.prepare({"messages": [USER]})
    assert body["max_tokens"] == 7  # 10 less the 3 generated
    assert "max_tokens" not in Trajectory().prepare({"messages": [USER]})[0]  # no limit: as the harness asked
