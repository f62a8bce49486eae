# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The RUN stage when an existing agent harness drives the policy instead of this agent's loop.

INIT and EVAL stay the environment's own (the task staged in the rollout's sandbox, the sandbox's
final state graded). In between, the harness runs unchanged, its model calls going over HTTP to
this agent's capture endpoint for the rollout (prorl_gym/capture), which forwards them to the model
server and records their exact token ids. It runs in one of two places:
- in the agent's process (`Harness`), in a thread of its own (harnesses are synchronous): its
  actions run in the rollout's sandbox through the environment's tools (an adapter implements the
  harness's own environment interface over them: harnesses/);
- inside the rollout's sandbox (`SandboxHarness`), acting on the workspace directly: the resources
  server runs its command there (POST /harness, prorl_gym/resources/harness.py) with a model URL on
  the sandbox's loopback that reaches the capture endpoint through a Unix socket and nothing else;
  what it printed (the tail) is in the record.

How it ends: the harness's own exit (submitted, its step limit, ...) is the stop reason and the
sandbox is graded; a limit the capture enforces (calls, output tokens, wall time) stops it with
the reason in the record, graded too; a policy call the model server failed is a policy_error
(the infrastructure's: retried); a lost sandbox is sandbox_lost; anything else the harness raises
is a harness_error (not retried, not scored) with its traceback's tail (in the sandbox: a non-zero
exit, with what it printed). A harness that hangs is ended by the RUN stage's timeout: its capture
is closed and its actions in flight are cancelled, so a harness waiting on one ends at once and its
next model call or action is refused (a thread cannot be killed: one spinning in its own code runs
on until it calls out; in the sandbox, it is stopped after max_run_time_s, and every process of the
sandbox ends when the sandbox is released).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import aiohttp

from prorl_gym.capture import CaptureGateway, CaptureLimits, CaptureRecord
from prorl_gym.pipeline.loop import LOST_SANDBOX, LoopLimits, LoopStats
from prorl_gym.wire.failures import FailureType, RolloutFailure, Stage
from prorl_gym.wire.resources import HarnessRunRequest, HarnessRunResponse

UNLIMITED_RUN_S = 6 * 3600.0  # an in-sandbox harness without max_run_time_s: as long as a sandbox's lease
SANDBOX_RUN_GRACE_S = 60.0  # beyond max_run_time_s: for the resources server to stop the harness and answer
HARNESS_OUTPUT_KEPT = 8192  # characters of an in-sandbox harness's output kept in its record (the tail)


class SandboxActions:
    """The rollout's sandbox as a harness's adapter sees it, from the harness's thread: each call
    runs one of the environment's tools on the agent's event loop and waits for its answer."""

    def __init__(self, run_tool, loop: asyncio.AbstractEventLoop, timeout_s: float):
        self._run_tool, self._loop, self._timeout_s = run_tool, loop, timeout_s
        self._pending: set[concurrent.futures.Future] = set()
        self.closed = False

    def bash(self, command: str) -> tuple[str, int | None]:
        """(what the command printed, its exit code; None if it timed out or was interrupted)."""
        result = self.tool("bash", {"command": command})
        return result["content"], (result.get("metadata") or {}).get("exit_code")

    def tool(self, name: str, arguments: dict) -> dict:
        if self.closed:
            raise SandboxClosed("the rollout has ended: its sandbox takes no more actions")
        future = asyncio.run_coroutine_threadsafe(self._run_tool(name, arguments), self._loop)
        self._pending.add(future)
        try:
            return future.result(self._timeout_s + 5)
        except concurrent.futures.CancelledError:
            raise SandboxClosed("the rollout ended while this action ran") from None
        finally:
            self._pending.discard(future)

    def close(self) -> None:
        """No more actions; the ones in flight are cancelled (a harness waiting on one ends now)."""
        self.closed = True
        for future in list(self._pending):
            future.cancel()


class SandboxClosed(Exception):
    """An action of a harness whose rollout has ended."""


@dataclass
class HarnessExit:
    status: str  # the harness's own word for how it ended (mini-swe-agent: Submitted, LimitsExceeded, ...)
    detail: str = ""


def json_events_last_first(output: str) -> Iterator[dict]:
    """The JSON objects among a CLI harness's output lines, last first (how it ended is said last)."""
    for line in reversed(output.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


@runtime_checkable
class Harness(Protocol):
    """An agent harness run unchanged in the agent's process: `run` blocks (in a thread of its own)
    until the harness ends."""

    def run(self, task: str, sandbox: SandboxActions, model_base_url: str) -> HarnessExit: ...


@runtime_checkable
class SandboxHarness(Protocol):
    """An agent harness run unchanged inside the rollout's sandbox, from its prepared environment."""

    env: str  # its prepared environment (.venvs/harnesses/<env>, in the resources server's harness_envs)
    cwd: str | None  # where it starts (None: the sandbox's workspace)

    def command(self) -> str:
        """Its shell command: it finds $PRORL_HARNESS_ENV, $PRORL_MODEL_URL and $PRORL_TASK_FILE."""
        ...

    def exit_of(self, result: HarnessRunResponse) -> HarnessExit:
        """How it ended, from what a run that exited 0 printed."""
        ...


class HarnessFailed(Exception):
    """An in-sandbox harness exited non-zero."""


@dataclass
class HarnessLoop:
    """Stands where AgentLoop stands in the pipeline: run() -> stop reason; outputs, stats after."""

    harness: Harness
    task: str
    metadata: dict[str, str] | None  # the row's request metadata, sent with the harness's calls
    gateway: CaptureGateway
    agent_url: str  # this agent's own address: where the harness's model calls go
    client: Any  # PeerClient
    resources_server: str
    resources_cookies: dict[str, str]
    limits: LoopLimits
    threads: ThreadPoolExecutor
    outputs: list = field(default_factory=list)
    stats: LoopStats = field(default_factory=LoopStats)
    last_response: Any = None
    capture: CaptureRecord | None = None
    harness_output: str = ""  # what an in-sandbox harness printed (its tail)
    on_turn: Any = None  # snapshots after each turn: not available to a harness's turns

    async def run(self) -> str:
        limits = CaptureLimits(
            max_calls=self.limits.max_turns,
            max_output_tokens=self.limits.max_output_tokens,
            max_wall_s=self.limits.max_run_time_s,
        )
        key = self.gateway.open(limits, self.metadata)
        actions = SandboxActions(self._run_tool, asyncio.get_running_loop(), self.limits.tool_call_timeout_s)
        url = f"{self.agent_url}/capture/{key}/v1"
        crashed: BaseException | None = None
        try:
            if isinstance(self.harness, SandboxHarness):
                ended = await self._run_in_sandbox(self.harness, url)
            else:
                ended = await asyncio.get_running_loop().run_in_executor(
                    self.threads, self.harness.run, self.task, actions, url
                )
        except RolloutFailure:
            raise  # the sandbox was lost under an action: typed where it happened
        except Exception as exc:  # noqa: BLE001 - what the harness raised is judged below, with its capture
            crashed, ended = exc, None
        finally:  # also on cancellation (the RUN timeout): the harness's next model call or action is refused
            actions.close()
            self.capture = self.gateway.end(key).model_copy(update={"harness_output": self.harness_output})
            self._account(self.capture)
        if self.capture.stopped:  # a limit the service enforces: a graded attempt, as the built-in loop's limits
            return f"limit: {self.capture.stopped}"
        if crashed is not None:
            if self.capture.policy_errors:
                message = f"a policy call of the harness failed: {self.capture.policy_errors[-1]}"
                raise RolloutFailure(Stage.RUN, FailureType.POLICY_ERROR, message, infra=True) from crashed
            if isinstance(crashed, HarnessFailed):
                raise RolloutFailure(Stage.RUN, FailureType.HARNESS_ERROR, f"{crashed}\n{self.harness_output[-2000:]}")
            tail = "".join(traceback.format_exception(crashed))[-2000:]
            raise RolloutFailure(Stage.RUN, FailureType.HARNESS_ERROR, f"the harness raised {crashed!r}\n{tail}")
        return ended.status.lower() if not ended.detail else f"{ended.status.lower()}: {ended.detail[:200]}"

    async def _run_in_sandbox(self, harness: SandboxHarness, url: str) -> HarnessExit:
        """The harness's command, run by the resources server inside the sandbox until it exits or
        max_run_time_s is up (then a graded attempt, as the built-in loop's time limit)."""
        request = HarnessRunRequest(
            harness_env=harness.env,
            command=harness.command(),
            task=self.task,
            model_base_url=url,
            cwd=harness.cwd,
            timeout_s=self.limits.max_run_time_s or UNLIMITED_RUN_S,
        )
        try:
            async with asyncio.timeout(request.timeout_s + SANDBOX_RUN_GRACE_S):
                response = await self.client.post(
                    server_name=self.resources_server,
                    url_path="/harness",
                    json=request.model_dump(),
                    cookies=self.resources_cookies,
                )
                payload = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:  # the resources server died or went silent
            message = f"the resources server did not answer the harness's run: {exc!r}"
            raise RolloutFailure(Stage.RUN, FailureType.TOOL_ERROR, message, infra=True) from exc
        if response.status in LOST_SANDBOX:
            message = f"the sandbox is lost under the harness ({response.status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.SANDBOX_LOST, message, infra=True)
        if response.status != 200:  # a config error (unknown env: 422, a remote sandbox: 501) or the server's
            message = f"running the harness in the sandbox failed ({response.status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.HARNESS_ERROR, message, infra=response.status >= 500)
        result = HarnessRunResponse.model_validate_json(payload)
        self.harness_output = result.output[-HARNESS_OUTPUT_KEPT:]
        if result.timed_out:
            return HarnessExit(status="limit", detail=f"the harness ran past max_run_time_s ({request.timeout_s:g}s)")
        if result.exit_code != 0:
            raise HarnessFailed(f"the harness exited with {result.exit_code} after {result.duration_s:.1f}s")
        return harness.exit_of(result)

    async def _run_tool(self, name: str, arguments: dict) -> dict:
        started = time.perf_counter()
        self.stats.tool_calls += 1
        try:
            async with asyncio.timeout(self.limits.tool_call_timeout_s):
                response = await self.client.post(
                    server_name=self.resources_server,
                    url_path=f"/{name}",
                    json=arguments,
                    cookies=self.resources_cookies,
                )
                payload = await response.read()
        finally:
            self.stats.tools_s += time.perf_counter() - started
        if response.status in LOST_SANDBOX:
            message = f"tool {name!r}: the sandbox is lost ({response.status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.SANDBOX_LOST, message, infra=True)
        if response.status != 200:
            message = f"tool {name!r} failed ({response.status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.TOOL_ERROR, message, infra=response.status >= 500)
        result = json.loads(payload)
        self.stats.tool_exec_s += float((result.get("metadata") or {}).get("duration_s") or 0.0)
        return result

    def _account(self, capture: CaptureRecord) -> None:
        """The record's transcript is the branch of the harness's last call (its history, ids on every
        generation of it the branch holds whole, contiguous); every call and the whole token tree are
        in `capture` (prorl_gym/capture/export.py makes a trainer's branches of it)."""
        self.stats.turns = len(capture.calls)
        self.stats.output_tokens = capture.output_tokens
        self.stats.policy_s = sum(c.latency_s for c in capture.calls)
        self.stats.policy_versions = [c.policy_version for c in capture.calls if c.policy_version is not None]
        kinds = ["extended" if c.extends is not None else "rendered" for c in capture.calls]
        self.stats.token_prompts = {k: kinds.count(k) for k in set(kinds)}
        self.outputs = capture.transcript()[1]
