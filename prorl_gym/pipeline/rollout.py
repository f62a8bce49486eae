# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One rollout = INIT -> RUN -> EVAL, each stage in its own worker pool; infrastructure failures retried.

    INIT  resources server /seed_session: sandbox created, task staged (+ its tool list)
    RUN   the multi-turn loop (loop.py): policy via the model server <-> tool routes
    EVAL  resources server /verify: reward; the sandbox is closed there

Whatever happens, the result is a RolloutRecord and the sandbox is released. A failure the
infrastructure caused (`Failure.infra`: a sandbox that would not start or was lost, a server
that died, a policy endpoint gone before it answered, the verifier machinery) runs the whole
rollout again, from a fresh INIT, once the part it needs is healthy again (recovery.py), up to
`retry.max_attempts` (an attempt the part turned away before any work, `Failure.refused`, is
not counted there: a part that recovers and falls again within seconds would otherwise use up
the budget of rollouts that never ran); the record carries `attempts`, each earlier attempt's
failure and the time spent waiting (`timings.retry_wait_s`). Peers are called through PeerClient: a dead server is an
error at once, not after the tool timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from prorl_gym.config import StrictConfig
from prorl_gym.pipeline.loop import AgentLoop, LoopLimits
from prorl_gym.pipeline.peers import PeerUnreachable, error_type, exchange
from prorl_gym.pipeline.policy import PolicyGate
from prorl_gym.pipeline.recovery import Part, PartGone, PolicyDown, Recovery, part_of
from prorl_gym.pipeline.stages import StagePool
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.tokens.template import text_of
from prorl_gym.wire.failures import Failure, FailureType, RolloutFailure, Stage
from prorl_gym.wire.items import without_token_ids
from prorl_gym.wire.records import (
    BRANCH_KEY,
    NG_FAILURE_CLASS_KEY,
    SNAPSHOTS_KEY,
    BranchedFrom,
    RolloutRecord,
    TurnSnapshot,
    failed_record,
)
from prorl_gym.wire.resources import SANDBOX_LOST_ERROR, SNAPSHOT_KEY, ToolsResponse

log = logging.getLogger(__name__)


class RunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")


class Branch(BaseModel):
    """A row's BRANCH_KEY: continue a finished rollout from its snapshot after `turn`."""

    job_id: str
    turn: int = Field(ge=1)
    snapshot_id: str
    output: list[dict[str, Any]]  # the transcript's items up to that turn, token ids included


OUTPUT_ITEMS = TypeAdapter(NeMoGymResponse.model_fields["output"].annotation)
SnapshotMode = Literal["none", "every_turn"]


class RetryPolicy(StrictConfig):
    """Infrastructure failures run the rollout again once the part it needs is healthy (recovery.py)."""

    max_attempts: int = Field(4, ge=1)  # 1: never run a rollout again
    # attempts turned away before any work (Failure.refused) are not counted above, only here
    max_refusals: int = Field(50, ge=0)
    backoff_s: float = Field(1.0, ge=0)  # at least this long between attempts, healthy or not
    recovery_timeout_s: float = Field(600.0, gt=0)  # a part not healthy again by then: the rollout ends failed


@dataclass
class Peers:
    """Who a rollout talks to, and how (a PeerClient, or a stand-in in tests)."""

    client: Any  # .post / .get(server_name, url_path, json=, cookies=) -> response with .status/.read()/.cookies
    resources_server: str
    model_server: str


@dataclass
class _Attempt:
    """One run of the pipeline for a row: its state, kept for the record."""

    cookies: dict
    timings: dict[str, float] = field(default_factory=dict)
    loop: AgentLoop | None = None
    verified: dict | None = None
    host: str | None = None
    snapshots: list[TurnSnapshot] = field(default_factory=list)


class RolloutPipeline:
    def __init__(
        self,
        peers: Peers,
        pools: dict[Stage, StagePool],
        limits: LoopLimits,
        retry: RetryPolicy,
        release_timeout_s: float,
        coupled: asyncio.Semaphore | None = None,
        snapshots: SnapshotMode = "none",
        verify_token_ids: bool = False,
    ):
        self.peers, self.pools, self.limits, self.retry = peers, pools, limits, retry
        self.snapshots = snapshots  # for rows that do not say (SNAPSHOTS_KEY)
        self.verify_token_ids = verify_token_ids
        self.release_timeout_s = release_timeout_s
        self._coupled = coupled  # one slot per rollout for all stages: the benchmark baseline
        self._tools: ToolsResponse | None = None
        self.on_attempt: Callable[[RolloutRecord], None] | None = None  # metrics hooks
        self.on_wait: Callable[[Part, float], None] | None = None
        self.recovery = Recovery(peers)
        # (task, row metadata, resources cookies) -> the RUN stage of a harness (harness.py), if the agent runs one
        self.harness_loop: Callable[[str, dict | None, dict], Any] | None = None
        self.gate: PolicyGate | None = None  # the policy's version and pause, set by the agent

    async def rollout(self, row: dict, cookies: dict | None = None) -> RolloutRecord:
        """One rollout through INIT -> RUN -> EVAL, attempts included; the record, whatever happened."""
        started = time.perf_counter()
        earlier: list[Failure] = []
        async with self._coupled or nullcontext():
            queued = {"coupled_queue_s": time.perf_counter() - started} if self._coupled else {}
            waited, attempt, refusals = 0.0, 0, 0
            while True:
                if said := self.recovery.policy_down():  # no sandbox for a rollout that cannot run
                    down = Failure(stage=Stage.INIT, type=FailureType.POLICY_DOWN, message=said, infra=True)
                    record = failed_record(row, down, {"total_s": time.perf_counter() - started})
                    break
                attempt += 1
                record = await self._attempt(row, _Attempt(dict(cookies or {}), dict(queued)), started)
                if self.on_attempt is not None:
                    self.on_attempt(record)
                failure = record.failure
                if failure is None or not failure.infra:
                    break
                refusals += failure.refused
                if attempt - refusals >= self.retry.max_attempts or refusals > self.retry.max_refusals:
                    break
                await self.release_snapshots([s.snapshot_id for s in record.snapshots])  # of a discarded attempt
                part = part_of(failure)
                log.warning("attempt %d failed (%s, infrastructure): waiting for the %s", attempt, failure.type, part)
                try:
                    seconds, healthy = await self.recovery.wait(
                        part, self.retry.backoff_s, self.retry.recovery_timeout_s
                    )
                except PartGone as exc:
                    kind = FailureType.POLICY_DOWN if isinstance(exc, PolicyDown) else FailureType.SERVER_DOWN
                    gone = Failure(stage=failure.stage, type=kind, message=str(exc), infra=True)
                    record = record.model_copy(update={"failure": gone, "ng_failure_class": gone.type.value})
                    break
                waited += seconds
                if self.on_wait is not None:
                    self.on_wait(part, seconds)
                if not healthy:
                    message = f"{failure.message} (the {part} was not healthy again within {seconds:.0f}s)"
                    record = record.model_copy(update={"failure": failure.model_copy(update={"message": message})})
                    break
                earlier.append(failure)
        if waited:
            record.timings["retry_wait_s"] = waited
        return record.model_copy(update={"attempts": attempt, "attempt_failures": earlier})

    async def _attempt(self, row: dict, a: _Attempt, started: float) -> RolloutRecord:
        stage, failure, branch = Stage.INIT, None, None
        task_row = {k: v for k, v in row.items() if k not in (BRANCH_KEY, SNAPSHOTS_KEY)}
        try:
            params = RunRequest.model_validate(task_row).responses_create_params
            seed_row = task_row
            if row.get(BRANCH_KEY) is not None:  # INIT is a fork of the snapshot the branch starts from
                branch = Branch.model_validate(row[BRANCH_KEY])
                seed_row = task_row | {SNAPSHOT_KEY: branch.snapshot_id}
            tools = await self.pools[Stage.INIT].run(lambda: self._init(seed_row, a), a.timings)
            stage = Stage.RUN
            a.loop = self.new_loop(params, tools, a.cookies, branch)
            if row.get(SNAPSHOTS_KEY, self.snapshots) == "every_turn":
                a.loop.on_turn = lambda turn: self._snapshot(a, turn)
            paused_before = self.gate.paused_s if self.gate else 0.0
            try:
                stop_reason = await self.pools[Stage.RUN].run(a.loop.run, a.timings)
            except RolloutFailure as exc:
                # Held by a pause for a weight update past its RUN timeout: the trainer's doing, not the task's.
                if exc.failure.type == FailureType.TIMEOUT and self.gate and self.gate.paused_s > paused_before:
                    message = f"{exc.failure.message}, paused for a weight update meanwhile"
                    raise RolloutFailure(Stage.RUN, FailureType.TIMEOUT, message, infra=True) from exc
                raise
            stage = Stage.EVAL
            a.verified = await self.pools[Stage.EVAL].run(lambda: self._eval(task_row, a, stop_reason), a.timings)
        except RolloutFailure as exc:
            failure = exc.failure
        except ValidationError as exc:  # a row without usable responses_create_params (or branch)
            failure = Failure(stage=Stage.INIT, type=FailureType.INIT_ERROR, message=f"malformed row: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("agent error in %s", stage)
            message = f"{exc!r}\n{traceback.format_exc()[-1500:]}"
            failure = Failure(stage=stage, type=FailureType.AGENT_ERROR, message=message)
        finally:
            if a.verified is None:  # /verify closes the sandbox; on any other path release it here
                await asyncio.shield(self._release(a.cookies))
        a.timings["total_s"] = time.perf_counter() - started
        record = self._record(task_row, a, failure)
        if branch is not None:
            record.branched_from = BranchedFrom(job_id=branch.job_id, turn=branch.turn)
        return record

    # ------------------------------------------------------------------ INIT

    async def _init(self, row: dict, a: _Attempt) -> ToolsResponse:
        seeding = asyncio.ensure_future(self._seed(row, a))
        try:
            await asyncio.shield(seeding)
        except asyncio.CancelledError:
            # The server may be starting this rollout's sandbox: wait for its session cookie,
            # so that the release that follows finds the sandbox instead of leaking it.
            with suppress(Exception):
                await asyncio.wait_for(seeding, self.release_timeout_s)
            raise
        return await self.tool_list()

    async def _seed(self, row: dict, a: _Attempt) -> None:
        status, payload = await self._call(Stage.INIT, FailureType.INIT_ERROR, "/seed_session", row, a.cookies)
        if status != 200:
            # 503: the sandbox could not start or was lost (infrastructure); 4xx: the row; 500: staging failed
            message = f"seed_session returned {status}: {payload[:1500]!r}"
            lost = status == 503 and error_type(payload) == SANDBOX_LOST_ERROR
            kind = FailureType.SANDBOX_LOST if lost else FailureType.INIT_ERROR
            raise RolloutFailure(Stage.INIT, kind, message, infra=status == 503)
        answer = json.loads(payload) if payload else {}
        a.host = answer.get("host") if isinstance(answer, dict) else None

    async def row_problems(self, rows: list[dict]) -> list[dict]:
        """The rows the environment's own row model refuses, as [{index, error}] (the job API's check at
        submission). A server without /check_rows (NeMo Gym's own) has no model to check against: none."""
        answer = await exchange(
            self.peers.client,
            "post",
            self.peers.resources_server,
            "/check_rows",
            {"rows": rows},
            None,
            self.release_timeout_s,
        )
        if answer.status == 404:
            return []
        if answer.status != 200:
            raise RuntimeError(f"/check_rows returned {answer.status}: {answer.payload[:300]!r}")
        return json.loads(answer.payload)["problems"]

    async def tool_list(self) -> ToolsResponse:
        """The resources server's tools (our servers are the one home of their tool definitions). A server
        without /tools (NeMo Gym's own) lists none: each row then brings its own, in responses_create_params."""
        if self._tools is None:
            status, payload = await self._call(Stage.INIT, FailureType.INIT_ERROR, "/tools", None, {}, method="get")
            if status == 404:
                self._tools = ToolsResponse(tools=[], ends_rollout=[])
            elif status != 200:
                raise RolloutFailure(Stage.INIT, FailureType.INIT_ERROR, f"/tools returned {status}", infra=True)
            else:
                self._tools = ToolsResponse.model_validate_json(payload)
        return self._tools

    # ------------------------------------------------------------------ RUN

    def new_loop(
        self,
        params: NeMoGymResponseCreateParamsNonStreaming,
        tools: ToolsResponse,
        cookies: dict,
        branch: Branch | None = None,
    ):
        if self.harness_loop is not None:
            if branch is not None:
                raise RolloutFailure(Stage.INIT, FailureType.INIT_ERROR, "a harness's rollout cannot branch")
            return self.harness_loop(_task_text(params), params.metadata, cookies)
        if not params.tools:  # a row may bring its own tools; otherwise the server's
            if not tools.tools:
                message = (
                    "the resources server lists no tools (no /tools) and the row's responses_create_params has none"
                )
                raise RolloutFailure(Stage.INIT, FailureType.INIT_ERROR, message, infra=False)
            params = params.model_copy(update={"tools": tools.tools})
        loop = AgentLoop(
            client=self.peers.client,
            model_server=self.peers.model_server,
            resources_server=self.peers.resources_server,
            params=params,
            limits=self.limits,
            resources_cookies=cookies,
            finish_tools=frozenset(tools.ends_rollout),
            policy_failing=self._policy_failing,
            gate=self.gate,
        )
        if branch is not None:  # the policy sees the same prefix, token ids and all, and goes on from it
            loop.outputs = OUTPUT_ITEMS.validate_python(branch.output)
            loop.stats.turns = branch.turn  # limits (max_turns, max_output_tokens) count the prefix's turns too
            loop.stats.output_tokens = sum(len(item.get("generation_token_ids") or []) for item in branch.output)
        return loop

    async def _policy_failing(self) -> bool:
        try:
            return not await self.recovery.healthy(Part.POLICY)
        except PartGone:
            return True

    async def _snapshot(self, a: _Attempt, turn: int) -> None:
        """The sandbox as it is after this turn, for branches (a failed snapshot costs the rollout nothing)."""
        started = time.perf_counter()
        status, payload = await self._call(Stage.RUN, FailureType.TOOL_ERROR, "/snapshot", {}, a.cookies)
        a.timings["snapshot_s"] = a.timings.get("snapshot_s", 0.0) + time.perf_counter() - started
        if status != 200:
            log.warning("no snapshot after turn %d: /snapshot returned %d: %r", turn, status, payload[:500])
            return
        snapshot_id = json.loads(payload)["snapshot_id"]
        a.snapshots.append(TurnSnapshot(turn=turn, snapshot_id=snapshot_id, output_items=len(a.loop.outputs)))

    async def release_snapshots(self, snapshot_ids: list[str]) -> None:
        if snapshot_ids:
            await self._release_what("/snapshots/release", {"snapshot_ids": snapshot_ids}, {}, "snapshots")

    # ------------------------------------------------------------------ EVAL

    async def _eval(self, row: dict, a: _Attempt, stop_reason: str) -> dict:
        response = transcript(a.loop)
        if self.verify_token_ids:
            dumped = response.model_dump()
        else:  # the items' ids are never dumped: most of a transcript's bytes
            dumped = response.model_dump(exclude={"output"}) | {
                "output": [without_token_ids(i) for i in response.output]
            }
        request = row | {"response": dumped, "stop_reason": stop_reason}
        status, payload = await self._call(Stage.EVAL, FailureType.EVAL_ERROR, "/verify", request, a.cookies)
        if status != 200:  # 404 (no /verify) and 422 (the row does not fit the server's request) are permanent
            message = f"verify returned {status}: {payload[:1500]!r}"
            raise RolloutFailure(Stage.EVAL, FailureType.EVAL_ERROR, message, infra=status not in (404, 422))
        return json.loads(payload)

    # ------------------------------------------------------------------ the resources server

    async def _call(
        self, stage: Stage, kind: FailureType, path: str, body: Any, cookies: dict, method: str = "post"
    ) -> tuple[int, bytes]:
        """A call to the resources server; its session cookies are kept; unreachable is an infra failure."""
        try:
            answer = await exchange(self.peers.client, method, self.peers.resources_server, path, body, cookies)
        except PeerUnreachable as exc:
            # A refused connection at INIT: no sandbox was started, so nothing ran (no attempt used up).
            message = f"the resources server is unreachable: {exc.reason}"
            raise RolloutFailure(
                stage, kind, message, infra=True, refused=stage == Stage.INIT and exc.refused
            ) from exc
        cookies.update(answer.cookies)
        return answer.status, answer.payload

    async def _release(self, cookies: dict) -> None:
        await self._release_what("/release", {}, cookies, "the sandbox")

    async def _release_what(self, path: str, body: dict, cookies: dict, what: str) -> None:
        """Best effort, bounded: what is not released here the resources server expires."""
        try:
            async with asyncio.timeout(self.release_timeout_s):
                await self._call(Stage.EVAL, FailureType.EVAL_ERROR, path, body, cookies)
        except Exception:
            log.warning("could not release %s; the resources server will expire it", what, exc_info=True)

    # ------------------------------------------------------------------ the record

    def _record(self, row: dict, a: _Attempt, failure: Failure | None) -> RolloutRecord:
        """The verify response (or the row, without one) with the transcript as the policy produced it (the
        verifier's echo of it lacks the token ids unless verify_token_ids), and our own fields."""
        loop = a.loop
        fields = (a.verified if a.verified is not None else row) | {"response": transcript(loop).model_dump()}
        failure = failure or (Failure.model_validate(fields["failure"]) if fields.get("failure") else None)
        stats = loop.stats if loop else None
        if stats:
            a.timings |= {"policy_s": stats.policy_s, "tools_s": stats.tools_s, "tool_exec_s": stats.tool_exec_s}
        versions = list(stats.policy_versions) if stats else []
        return RolloutRecord.model_validate(
            fields
            | {
                "reward": 0.0 if failure or a.verified is None else fields["reward"],
                "failure": failure,
                NG_FAILURE_CLASS_KEY: failure.type.value if failure else None,
                "stop_reason": fields.get("stop_reason"),
                "timings": a.timings,
                "num_turns": stats.turns if stats else 0,
                "num_tool_calls": stats.tool_calls if stats else 0,
                "malformed_tool_calls": stats.malformed_tool_calls if stats else 0,
                "repeated_tool_calls": stats.repeated_tool_calls if stats else 0,
                "tool_call_paths": stats.tool_call_paths if stats else [],
                "token_ids_contiguous": token_ids_contiguous(fields["response"].get("output", [])),
                "token_ids": _has_token_ids(fields["response"].get("output", [])) if loop else None,
                "token_prompts": stats.token_prompts if stats else {},
                "policy_versions": versions,
                "oldest_policy_version": min(versions, default=None),
                "newest_policy_version": max(versions, default=None),
                "host": a.host,
                "snapshots": a.snapshots,
                "capture": loop.capture.model_dump() if getattr(loop, "capture", None) else None,
            }
        )


def _task_text(params: NeMoGymResponseCreateParamsNonStreaming) -> str:
    """What a harness is given as its task: the row's last user message (its own prompt wraps it)."""
    if isinstance(params.input, str):  # the Responses API's shorthand for one user message
        return params.input
    for item in reversed(params.input):
        item = item if isinstance(item, dict) else item.model_dump()
        if item.get("role") == "user":
            return text_of(item.get("content"))
    raise RolloutFailure(Stage.INIT, FailureType.INIT_ERROR, "the row has no user message to give the harness")


def _has_token_ids(items: list) -> bool:
    return any("generation_token_ids" in (i if isinstance(i, dict) else i.model_dump()) for i in items)


def transcript(loop: AgentLoop | None) -> NeMoGymResponse:
    """The whole rollout as one response: every turn's output items, usage summed."""
    base = loop.last_response if loop and loop.last_response else None
    if base is None:
        return NeMoGymResponse(
            id="resp_none",
            created_at=int(time.time()),
            model="",
            object="response",
            output=list(loop.outputs) if loop else [],
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
    usage = base.usage.model_copy(update={"output_tokens": loop.stats.output_tokens}) if base.usage else None
    return base.model_copy(update={"output": list(loop.outputs), "usage": usage})
