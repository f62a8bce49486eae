# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Which call extends which, and what becomes a segment (no I/O: replies written here)."""

from __future__ import annotations

import pytest

from prorl_gym.capture import CaptureLimits, CaptureRefused, Trajectory

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
    body, extends = t.prepare({"messages": [SYSTEM, USER, echoed, {"role": "user", "content": "and 3+3?"}]})
    assert extends == 0 and body["messages"][2]["generation_token_ids"] == [4, 5]
    assert body["messages"][2]["prompt_token_ids"] == [1, 2, 3]


def test_retries_and_branches_start_segments_and_say_what_they_extend():
    t = Trajectory()
    reply = call(t, [SYSTEM, USER], completion("4", [1, 2], [3]))["choices"][0]["message"]
    follow = [SYSTEM, USER, reply, {"role": "user", "content": "sure?"}]
    call(t, follow, completion("yes", [1, 2, 3, 9], [5]))
    call(t, follow, completion("yes!", [1, 2, 3, 9], [6]))  # the same call again (a harness's retry)
    call(t, [SYSTEM, {"role": "user", "content": "summary: 4"}], completion("ok", [7], [8]))
    record = t.record()
    assert [c.extends for c in record.calls] == [None, 0, 0, None]
    assert [s.calls for s in record.segments] == [[0, 1], [2], [3]]
    assert [s.token_ids_contiguous for s in record.segments] == [True, True, True]
    assert record.output_tokens == 4


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
        _, extends = t.prepare({"messages": [USER, echoed, {"role": "user", "content": "and 3+3?"}]})
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
