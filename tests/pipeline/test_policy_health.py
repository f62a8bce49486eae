# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The policy's health as the agent reads it from its model server (prorl_gym/pipeline/policy_health.py):
declared down once no endpoint has been healthy for grace_s, up again with the first healthy one, never
with grace_s null; what a model server's answers mean; the job stream's events. (A real stack whose
policy dies: tests/test_policy_down.py.)"""

from __future__ import annotations

import asyncio
import json

from prorl_gym.pipeline.policy_health import PolicyHealth, PolicyHealthConfig
from prorl_gym.wire.jobs import STREAM_EVENT_PREFIX, PolicyHealthView

DEAD = [{"url": "http://gpu:8000/v1", "healthy": False, "failures": 3, "last_error": "cannot connect"}]
FAILING = [{"url": "http://gpu:8000/v1", "healthy": True, "failures": 1, "last_error": "timed out"}]
UP = [{"url": "http://gpu:8000/v1", "healthy": True, "failures": 0, "last_error": None}]


def health(grace_s: float | None = 60.0, answer=None) -> PolicyHealth:
    async def probe():
        if isinstance(answer, Exception):
            raise answer
        return answer

    return PolicyHealth(PolicyHealthConfig(grace_s=grace_s), probe)


async def test_declared_down_once_after_the_grace_period_and_up_with_the_first_healthy_endpoint():
    h = health()
    h.observe(False, DEAD, "cannot connect", now=100.0)
    h.observe(False, DEAD, "cannot connect", now=159.0)
    assert not h.down and h.down_message() is None and h.version == 0
    h.observe(False, DEAD, "cannot connect", now=160.0)
    assert h.down and h.downs == 1 and h.version == 1
    assert "policy_down" in h.down_message() and "grace_s: 60s" in h.down_message()
    h.observe(False, DEAD, "cannot connect", now=500.0)  # still down: declared once
    assert h.downs == 1 and h.version == 1
    h.observe(True, UP, "", now=501.0)
    assert not h.down and h.healthy and h.version == 2 and h.unhealthy_s == 0.0


async def test_a_failure_since_the_last_success_counts_as_unhealthy_and_a_success_restarts_the_clock():
    h = health()
    h.observe(False, FAILING, "timed out", now=0.0)
    h.observe(True, UP, "", now=30.0)
    h.observe(False, FAILING, "timed out", now=40.0)
    h.observe(False, FAILING, "timed out", now=99.0)  # 59 s since the clock restarted
    assert not h.down


async def test_grace_null_never_declares_it_down():
    h = health(grace_s=None)
    h.observe(False, DEAD, "cannot connect", now=0.0)
    h.observe(False, DEAD, "cannot connect", now=1e6)
    assert not h.down and not h.healthy


async def test_what_the_model_servers_answers_mean():
    for answer, healthy in [
        ((200, json.dumps({"endpoints": UP}).encode()), True),
        ((200, json.dumps({"endpoints": FAILING}).encode()), False),
        ((200, json.dumps({"endpoints": []}).encode()), False),  # none configured
        ((404, b"Not Found"), True),  # not ours (vllm_model): it cannot say, so the policy is taken as up
        ((503, b'{"error": {"type": "server_gave_up"}}'), False),
    ]:
        h = health(answer=answer)
        await h.poll()
        assert h.healthy == healthy, answer
    h = health(answer=ConnectionRefusedError("model server starting"))
    await h.poll()  # nothing known before the model server has answered once (it may still be starting)
    assert h.healthy
    h._probe = health(answer=(200, json.dumps({"endpoints": UP}).encode()))._probe
    await h.poll()
    h._probe = health(answer=ConnectionRefusedError("model server gone"))._probe
    await h.poll()
    assert not h.healthy and "the model server does not answer" in h.reason
    h = health(answer=(200, json.dumps({"endpoints": DEAD}).encode()))
    await h.poll()
    assert h.endpoints == [{"url": "http://gpu:8000/v1", "healthy": False, "last_error": "cannot connect"}]
    assert "http://gpu:8000/v1: cannot connect" in h.view().message


async def test_a_stream_tells_the_state_it_starts_in_and_each_change_among_its_records():
    h = health(grace_s=1.0)
    h.observe(False, DEAD, "cannot connect", now=0.0)
    h.observe(False, DEAD, "cannot connect", now=1.0)  # down before the stream starts
    records: asyncio.Queue = asyncio.Queue()

    async def lines():
        while (line := await records.get()) is not None:
            yield line

    stream = h.told(lines())
    seen = [await anext(stream)]
    await records.put('{"reward": 1.0}')
    seen.append(await anext(stream))
    reading = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    h.observe(True, UP, "")  # the policy comes back while the stream waits for a record
    seen.append(await reading)
    await records.put(None)
    assert [line async for line in stream] == []
    events = [
        PolicyHealthView.model_validate_json(line) for line in seen if line.encode().startswith(STREAM_EVENT_PREFIX)
    ]
    assert [e.event for e in events] == ["policy_down", "policy_up"] and seen[1] == '{"reward": 1.0}'
    assert events[0].down and events[0].endpoints[0]["last_error"] == "cannot connect"
