# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How a harness's run ends, with its peers played by the fake client: a crash, a lost sandbox, a
failed policy call, a limit the capture enforces, and a harness still calling after its rollout."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import pytest

from prorl_gym.capture import CaptureGateway, CaptureRefused
from prorl_gym.pipeline.loop import LoopLimits
from prorl_gym.wire.failures import FailureType, RolloutFailure
from responses_api_agents.prorl_agent.harness import HarnessExit, HarnessLoop, SandboxClosed
from tests.support.fakes import FakeClient, FakeResponse

USER = {"role": "user", "content": "fix it"}


def reply(prompt: list[int]) -> FakeResponse:
    message = {"role": "assistant", "content": "ok", "prompt_token_ids": prompt, "generation_token_ids": [7]}
    return FakeResponse(
        200, {"id": "c", "choices": [{"index": 0, "message": message | {"generation_log_probs": [0.0]}}]}
    )


class Scripted:
    """A harness that does what `steps` say from its thread: ("bash", cmd), ("model", messages), ("raise", exc)."""

    def __init__(self, *steps):
        self.steps, self.loop, self.gateway, self.seen, self.ended = steps, None, None, [], None

    def run(self, task, sandbox, model_base_url):
        try:
            return self._run(sandbox, model_base_url)
        except BaseException as exc:
            self.ended = exc
            raise

    def _run(self, sandbox, model_base_url):
        key = model_base_url.rstrip("/").split("/")[-2]
        for kind, value in self.steps:
            if kind == "bash":
                self.seen.append(sandbox.bash(value))
            elif kind == "model":
                call = self.gateway.chat_completions(key, {"messages": value})
                status, answer = asyncio.run_coroutine_threadsafe(call, self.loop).result(10)
                if status != 200:
                    raise RuntimeError(f"the model server said {status}")
                self.seen.append(answer)
            else:
                raise value
        return HarnessExit("Submitted")


@pytest.fixture
def fake():
    fake = FakeClient.create()
    fake.route("env", "/bash", lambda body: {"content": "done", "metadata": {"exit_code": 0, "duration_s": 0.1}})
    fake.route("model", "/v1/chat/completions", lambda body: reply([1, 2]))
    return fake


async def run(fake, harness, **limits) -> HarnessLoop:
    """The harness's RUN stage against the fake peers (an in-process one, or one the fake resources
    server's /harness plays)."""
    gateway = CaptureGateway(fake, "model")
    GATEWAYS.append(gateway)
    harness.loop, harness.gateway = asyncio.get_running_loop(), gateway
    loop = HarnessLoop(
        harness=harness,
        task="fix it",
        metadata=None,
        gateway=gateway,
        agent_url="http://agent",
        client=fake,
        resources_server="env",
        resources_cookies={},
        limits=LoopLimits(**limits),
        threads=ThreadPoolExecutor(2),
    )
    loop.stop_reason = await loop.run()
    return loop


GATEWAYS: list[CaptureGateway] = []  # the latest: the one a fake /harness calls through


async def test_a_harness_that_submits_is_graded_with_its_calls_and_actions_counted(fake):
    loop = await run(fake, Scripted(("model", [USER]), ("bash", "ls")))
    assert loop.stop_reason == "submitted" and loop.stats.turns == 1 and loop.stats.tool_calls == 1
    assert loop.outputs[-1]["generation_token_ids"] == [7] and len(loop.gateway) == 0  # its capture ended


async def test_a_crash_is_a_harness_error_with_its_traceback(fake):
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, Scripted(("bash", "ls"), ("raise", KeyError("no such action"))))
    failure = failed.value.failure
    assert failure.type == FailureType.HARNESS_ERROR and not failure.infra
    assert "no such action" in failure.message and "Traceback" in failure.message


async def test_a_lost_sandbox_is_typed_where_it_happened(fake):
    fake.route("env", "/bash", lambda body: FakeResponse(409, {"error": {"type": "unknown_session"}}))
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, Scripted(("bash", "ls")))
    assert failed.value.failure.type == FailureType.SANDBOX_LOST and failed.value.failure.infra


async def test_a_policy_call_the_model_server_failed_is_the_infrastructures(fake):
    fake.route("model", "/v1/chat/completions", lambda body: FakeResponse(503, {"detail": "endpoint died"}))
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, Scripted(("model", [USER])))
    assert failed.value.failure.type == FailureType.POLICY_ERROR and failed.value.failure.infra
    assert "endpoint died" in failed.value.failure.message


async def test_a_limit_stops_the_harness_and_the_attempt_is_graded_saying_why(fake):
    loop = await run(fake, Scripted(("model", [USER]), ("model", [USER])), max_turns=1)
    assert loop.stop_reason.startswith("limit: the rollout made 1 policy calls")
    assert loop.capture.stopped and len(loop.capture.calls) == 1


async def test_a_call_after_the_rollout_ended_is_refused(fake):
    loop = await run(fake, Scripted(("model", [USER])))
    key = next(iter(loop.gateway._ended))
    with pytest.raises(CaptureRefused) as refused:
        await loop.gateway.chat_completions(key, {"messages": [USER]})
    assert refused.value.status == 410


async def test_a_hung_harness_is_ended_by_the_run_timeout_and_its_thread_let_go(fake):
    async def hang(body):
        await asyncio.sleep(30)

    fake.route("env", "/bash", hang)  # the harness waits on an action that never answers
    harness = Scripted(("bash", "sleep 1000"), ("model", [USER]))
    task = asyncio.ensure_future(run(fake, harness))
    await asyncio.sleep(0.5)
    task.cancel()  # what the RUN stage's timeout does
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(harness.gateway) == 0  # its capture ended
    for _ in range(50):  # its thread got the cancellation at once, not after the tool timeout
        if harness.ended is not None:
            break
        await asyncio.sleep(0.05)
    assert isinstance(harness.ended, SandboxClosed)


class InSandbox:
    """A harness placed in the sandbox: the fake resources server's /harness plays its run."""

    env, cwd = "mini_swe_agent", "/workspace"

    def command(self) -> str:
        return "mini ..."

    def exit_of(self, result) -> HarnessExit:
        return HarnessExit(result.output.splitlines()[-1])


def harness_run(exit_code=0, timed_out=False, output="log\nSubmitted", calls=0):
    """/harness: the harness makes `calls` model calls through the capture, then ends so."""

    async def handle(body):
        key = body["model_base_url"].rstrip("/").split("/")[-2]
        for _ in range(calls):
            await GATEWAYS[-1].chat_completions(key, {"messages": [USER]})
        return {"exit_code": exit_code, "timed_out": timed_out, "output": output, "duration_s": 1.0}

    return handle


async def test_in_the_sandbox_a_harness_is_run_by_the_resources_server_and_graded(fake):
    fake.route("env", "/harness", harness_run(calls=2))
    loop = await run(fake, InSandbox(), max_run_time_s=90)
    assert loop.stop_reason == "submitted" and loop.stats.turns == 2
    assert loop.capture.harness_output == "log\nSubmitted" and len(loop.gateway) == 0
    (_, path, body, _) = next(c for c in fake.calls if c[1] == "/harness")
    assert body["harness_env"] == "mini_swe_agent" and body["timeout_s"] == 90 and body["task"] == "fix it"
    assert body["model_base_url"].startswith("http://agent/capture/") and body["model_base_url"].endswith("/v1")


async def test_in_the_sandbox_a_harness_that_exits_nonzero_is_a_harness_error_with_its_output(fake):
    fake.route("env", "/harness", harness_run(exit_code=1, output="Traceback ...\nValueError: bad config"))
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, InSandbox())
    failure = failed.value.failure
    assert failure.type == FailureType.HARNESS_ERROR and not failure.infra and "bad config" in failure.message


async def test_in_the_sandbox_a_harness_past_its_time_is_a_graded_attempt(fake):
    fake.route("env", "/harness", harness_run(exit_code=130, timed_out=True, calls=1))
    loop = await run(fake, InSandbox(), max_run_time_s=5)
    assert loop.stop_reason == "limit: the harness ran past max_run_time_s (5s)"


async def test_in_the_sandbox_a_lost_sandbox_or_a_remote_one_is_typed(fake):
    fake.route("env", "/harness", lambda body: FakeResponse(503, {"error": {"type": "sandbox_lost"}}))
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, InSandbox())
    assert failed.value.failure.type == FailureType.SANDBOX_LOST and failed.value.failure.infra
    fake.route("env", "/harness", lambda body: FakeResponse(501, {"error": {"type": "harness_unsupported"}}))
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, InSandbox())
    assert failed.value.failure.type == FailureType.HARNESS_ERROR and "501" in failed.value.failure.message


async def test_in_the_sandbox_a_resources_server_that_goes_silent_is_the_infrastructures(fake):
    async def unreachable(body):
        raise aiohttp.ClientConnectionError("connection reset")

    fake.route("env", "/harness", unreachable)
    with pytest.raises(RolloutFailure) as failed:
        await run(fake, InSandbox())
    assert failed.value.failure.type == FailureType.TOOL_ERROR and failed.value.failure.infra
