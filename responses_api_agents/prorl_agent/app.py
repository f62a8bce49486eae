# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""ProRL agent: one rollout = INIT -> RUN -> EVAL, each stage in its own worker pool.

    INIT  resources server /seed_session: sandbox created, task staged (+ its tool list)
    RUN   the multi-turn loop (loop.py): policy via the model server <-> tool routes
    EVAL  resources server /verify: reward; the sandbox is closed there

`/run` (what ng_collect_rollouts and the NeMo RL trainer call) returns a RolloutRecord
(prorl_gym/pipeline/records.py): the verify response plus the rollout's own fields:
`failure` ({stage, type, message} or null), `stop_reason`, per-stage `timings`, turn and
tool-call counts, `host`, `attempts`, and whether the token ids obey NeMo RL's contiguity
rule. A failed rollout also carries `_ng_failure_class`, so ng_collect_rollouts writes it
to the failures sidecar instead of scoring it 0. The sandbox is released on every path.

The job API (submit batches, stream results, cancel, status; docs/job_api.md) runs the same
rollout(); its logic is prorl_gym/pipeline/jobs.py, only its routes are here.
"""

import asyncio
import json
import logging
import time
import traceback
from contextlib import nullcontext, suppress
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, Body, SimpleResponsesAPIAgent
from nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.server_utils import get_response_json
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from prorl_gym.client import Batch, CancelResult, JobLimits, StopAfter, SubmitRequest
from prorl_gym.lifespan import run_with_app
from prorl_gym.pipeline.failures import Failure, FailureType, RolloutFailure, Stage
from prorl_gym.pipeline.jobs import JobError, JobManager
from prorl_gym.pipeline.metrics import rollout_metrics
from prorl_gym.pipeline.records import NG_FAILURE_CLASS_KEY, RolloutRecord
from prorl_gym.pipeline.stages import StagePool
from prorl_gym.pipeline.tokens import token_ids_contiguous
from prorl_gym.resources.protocol import ToolsResponse
from responses_api_agents.prorl_agent.loop import AgentLoop, Limits

log = logging.getLogger(__name__)


class ProRLAgentConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    limits: Limits = Field(default_factory=Limits)
    max_init_workers: int = 16
    max_run_workers: int = 64
    max_eval_workers: int = 16
    init_timeout_s: float = 120.0
    run_timeout_s: float = 3600.0
    eval_timeout_s: float = 600.0
    release_timeout_s: float = 30.0
    # staged: INIT, RUN and EVAL each have their own worker pool (the design of this agent).
    # coupled: max_run_workers workers each do INIT+RUN+EVAL of one rollout in turn; the design
    # staged pipelines replace, kept as the same-run baseline of benchmarks/pipeline_overlap.
    pipeline: Literal["staged", "coupled"] = "staged"
    jobs: JobLimits = Field(default_factory=JobLimits)  # bounds of the job API

    @field_validator("num_workers")
    @classmethod
    def _one_process(cls, value: int | None) -> int | None:
        if value not in (None, 1):  # stage pools and jobs live in the process: several would split them
            raise ValueError("the ProRL agent keeps its pipeline and jobs in one process: num_workers must be 1")
        return value


class ProRLRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")


class ProRLAgent(SimpleResponsesAPIAgent):
    config: ProRLAgentConfig
    _pools: dict[Stage, StagePool] = PrivateAttr()
    _coupled: asyncio.Semaphore | None = PrivateAttr(default=None)
    _tools: ToolsResponse | None = PrivateAttr(default=None)
    _jobs: JobManager = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        c = self.config
        workers = {Stage.INIT: c.max_init_workers, Stage.RUN: c.max_run_workers, Stage.EVAL: c.max_eval_workers}
        if c.pipeline == "coupled":  # one slot per rollout, for all three stages
            self._coupled = asyncio.Semaphore(c.max_run_workers)
            workers = dict.fromkeys(workers, 1 << 20)
        timeouts = {Stage.INIT: c.init_timeout_s, Stage.RUN: c.run_timeout_s, Stage.EVAL: c.eval_timeout_s}
        self._pools = {stage: StagePool(stage, workers[stage], timeouts[stage]) for stage in Stage}
        self._jobs = JobManager(
            self.rollout,
            c.jobs,
            environments=(c.resources_server.name, c.name),
            validate_row=ProRLRunRequest.model_validate,
            stage_stats=lambda: {stage.value: pool.stats() for stage, pool in self._pools.items()},
        )
        return super().model_post_init(context)

    def setup_webserver(self):
        app = super().setup_webserver()
        self._mount_job_routes(app)
        return app

    # ------------------------------------------------------------------ /run: the pipeline

    async def run(self, request: Request, body: ProRLRunRequest) -> dict:
        # exclude_unset: a field the row left out must stay out (NeMo Gym's vllm_model
        # breaks on an explicit `metadata: null`).
        record = await self.rollout(body.model_dump(exclude_unset=True), dict(request.cookies))
        return record.wire()

    async def rollout(self, row: dict, cookies: dict | None = None) -> RolloutRecord:
        """One rollout through INIT -> RUN -> EVAL; the record, whatever happened."""
        started = time.perf_counter()
        async with self._coupled or nullcontext():
            timings = {"coupled_queue_s": time.perf_counter() - started} if self._coupled else {}
            return await self._rollout(row, dict(cookies or {}), timings, started)

    async def _rollout(self, row: dict, cookies: dict, timings: dict[str, float], started: float) -> RolloutRecord:
        stage, loop, verified, failure, seeded = Stage.INIT, None, None, None, {}
        try:
            params = ProRLRunRequest.model_validate(row).responses_create_params
            seeded, tools = await self._pools[Stage.INIT].run(lambda: self._init(row, cookies), timings)
            stage = Stage.RUN
            loop = self._new_loop(params, tools, cookies)
            stop_reason = await self._pools[Stage.RUN].run(loop.run, timings)
            stage = Stage.EVAL
            verified = await self._pools[Stage.EVAL].run(lambda: self._eval(row, loop, cookies, stop_reason), timings)
        except RolloutFailure as exc:
            failure = exc.failure
        except ValidationError as exc:  # a row without usable responses_create_params
            failure = Failure(stage=Stage.INIT, type=FailureType.INIT_ERROR, message=f"malformed row: {exc}")
        except asyncio.CancelledError:
            failure = Failure(stage=stage, type=FailureType.CANCELLED, message="rollout cancelled")
            raise
        except Exception as exc:
            log.exception("agent error in %s", stage)
            failure = Failure(
                stage=stage, type=FailureType.AGENT_ERROR, message=f"{exc!r}\n{traceback.format_exc()[-1500:]}"
            )
        finally:
            if verified is None:  # /verify closes the sandbox; on any other path release it here
                await asyncio.shield(self._release(cookies))
        timings["total_s"] = time.perf_counter() - started
        return self._record(row, loop, verified, failure, timings, seeded.get("host"))

    async def _init(self, row: dict, cookies: dict) -> tuple[dict, ToolsResponse]:
        seeding = asyncio.ensure_future(self._seed(row, cookies))
        try:
            seeded = await asyncio.shield(seeding)
        except asyncio.CancelledError:
            # The server may be starting this rollout's sandbox: wait for its session cookie,
            # so that the release that follows finds the sandbox instead of leaking it.
            with suppress(Exception):
                await asyncio.wait_for(seeding, self.config.release_timeout_s)
            raise
        return seeded, await self._tool_list()

    async def _seed(self, row: dict, cookies: dict) -> dict:
        response = await self.server_client.post(
            server_name=self.config.resources_server.name, url_path="/seed_session", json=row, cookies=cookies
        )
        payload = await response.read()
        cookies.update({name: morsel.value for name, morsel in response.cookies.items()})
        if response.status != 200:
            raise RolloutFailure(
                Stage.INIT, FailureType.INIT_ERROR, f"seed_session returned {response.status}: {payload[:1500]!r}"
            )
        return json.loads(payload)

    async def _tool_list(self) -> ToolsResponse:
        if self._tools is None:  # the resources server is the one home of its tool definitions
            response = await self.server_client.get(server_name=self.config.resources_server.name, url_path="/tools")
            if response.status != 200:
                raise RolloutFailure(Stage.INIT, FailureType.INIT_ERROR, f"/tools returned {response.status}")
            self._tools = ToolsResponse.model_validate(await get_response_json(response))
        return self._tools

    def _new_loop(
        self, params: NeMoGymResponseCreateParamsNonStreaming, tools: ToolsResponse, cookies: dict
    ) -> AgentLoop:
        if not params.tools:  # a row may bring its own tools; otherwise the server's
            params = params.model_copy(update={"tools": tools.tools})
        return AgentLoop(
            client=self.server_client,
            model_server=self.config.model_server.name,
            resources_server=self.config.resources_server.name,
            params=params,
            limits=self.config.limits,
            resources_cookies=cookies,
            finish_tools=frozenset(tools.ends_rollout),
        )

    async def _eval(self, row: dict, loop: AgentLoop, cookies: dict, stop_reason: str) -> dict:
        request = row | {"response": self._transcript(loop).model_dump(), "stop_reason": stop_reason}
        response = await self.server_client.post(
            server_name=self.config.resources_server.name, url_path="/verify", json=request, cookies=cookies
        )
        payload = await response.read()
        if response.status != 200:
            raise RolloutFailure(
                Stage.EVAL, FailureType.EVAL_ERROR, f"verify returned {response.status}: {payload[:1500]!r}"
            )
        return json.loads(payload)

    async def _release(self, cookies: dict) -> None:
        try:
            async with asyncio.timeout(self.config.release_timeout_s):
                response = await self.server_client.post(
                    server_name=self.config.resources_server.name, url_path="/release", json={}, cookies=cookies
                )
                await response.read()
        except Exception:
            log.warning("could not release the sandbox; the resources server will expire it", exc_info=True)

    def _transcript(self, loop: AgentLoop | None) -> NeMoGymResponse:
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

    def _record(
        self,
        row: dict,
        loop: AgentLoop | None,
        verified: dict | None,
        failure: Failure | None,
        timings: dict,
        host: str | None,
    ) -> RolloutRecord:
        """The record: the verify response (or the row and transcript, without one) and our own fields."""
        fields = verified if verified is not None else row | {"response": self._transcript(loop).model_dump()}
        failure = failure or (Failure.model_validate(fields["failure"]) if fields.get("failure") else None)
        stats = loop.stats if loop else None
        if stats:
            timings |= {"policy_s": stats.policy_s, "tools_s": stats.tools_s, "tool_exec_s": stats.tool_exec_s}
        return RolloutRecord.model_validate(
            fields
            | {
                "reward": 0.0 if failure or verified is None else fields["reward"],
                "failure": failure,
                NG_FAILURE_CLASS_KEY: failure.type.value if failure else None,
                "stop_reason": fields.get("stop_reason"),
                "timings": timings,
                "num_turns": stats.turns if stats else 0,
                "num_tool_calls": stats.tool_calls if stats else 0,
                "malformed_tool_calls": stats.malformed_tool_calls if stats else 0,
                "token_ids_contiguous": token_ids_contiguous(fields["response"].get("output", [])),
                "host": host,
            }
        )

    # ------------------------------------------------------------------ /v1/responses: the loop alone

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming = Body()
    ) -> NeMoGymResponse:
        """RUN only, for callers that seed and verify themselves (NeMo Gym's agent contract)."""
        loop = self._new_loop(body, await self._tool_list(), dict(request.cookies))
        await loop.run()
        return self._transcript(loop)

    # ------------------------------------------------------------------ the job API (docs/job_api.md)

    def _mount_job_routes(self, app: FastAPI) -> None:
        jobs = self._jobs
        run_with_app(app, jobs.start, jobs.close)  # at shutdown, running jobs are cancelled
        app.add_exception_handler(
            JobError, lambda _, exc: JSONResponse({"detail": exc.detail, **exc.extra}, exc.status)
        )

        @app.post("/jobs")
        async def submit(request: Request) -> Batch:
            body, limit = bytearray(), self.config.jobs.max_request_bytes
            async for chunk in request.stream():  # bounded: a chunked body has no length to check first
                body += chunk
                if len(body) > limit:
                    raise JobError(413, f"the request exceeds the limit of {limit} bytes")
            try:
                batch = SubmitRequest.model_validate_json(body)
            except ValidationError as exc:
                errors = json.loads(exc.json(include_url=False, include_input=False))
                raise JobError(422, "invalid request", errors=errors) from None
            return jobs.submit(batch)

        @app.get("/batches/{batch_id}/results")  # NDJSON, or server-sent events if asked for
        async def results(batch_id: str, request: Request, after: int = 0):
            records, sse = jobs.follow(batch_id, after), "text/event-stream" in request.headers.get("accept", "")

            async def lines():  # a None record is a heartbeat
                async for record in records:
                    line = json.dumps(record.wire()) if record is not None else ""
                    yield (f"data: {line}\n\n" if line else ": heartbeat\n\n") if sse else f"{line}\n"

            return StreamingResponse(lines(), media_type="text/event-stream" if sse else "application/x-ndjson")

        @app.post("/batches/{batch_id}/stop_after")
        async def stop_after(batch_id: str, body: StopAfter) -> CancelResult:
            return await jobs.stop_after(batch_id, body.k)

        app.get("/batches/{batch_id}")(jobs.batch)
        app.post("/batches/{batch_id}/cancel")(jobs.cancel_batch)
        app.get("/jobs/{job_id:path}")(jobs.job)  # default job ids hold '/': <batch>/<row>/<sample>
        app.post("/jobs/{job_id:path}/cancel")(jobs.cancel_job)
        app.get("/status")(jobs.status)

    # ------------------------------------------------------------------ metrics

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return rollout_metrics([rollout for task in tasks for rollout in task])

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        keys = ("mean/reward", "mean_reward_valid", "failure_rate", "contiguous_fraction")
        return {k: v for k, v in agent_metrics.items() if k in keys or k.startswith("failures/")}


if __name__ == "__main__":
    ProRLAgent.run_webserver()
