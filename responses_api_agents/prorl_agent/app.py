# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""ProRL agent: one rollout = INIT -> RUN -> EVAL, each stage in its own worker pool (rollout.py).

`/run` (what ng_collect_rollouts and the NeMo RL trainer call) returns a RolloutRecord
(prorl_gym/wire/records.py): the verify response plus the rollout's own fields:
`failure` ({stage, type, message} or null), `stop_reason`, per-stage `timings`, turn and
tool-call counts, `host`, `attempts` (infrastructure failures run the rollout again), and
whether the token ids obey NeMo RL's contiguity rule. A failed rollout also carries `_ng_failure_class`, so ng_collect_rollouts writes it
to the failures sidecar instead of scoring it 0. The sandbox is released on every path.

The job API (submit batches, stream results, cancel, status; docs/job_api.md) runs the same
rollout(); its logic is prorl_gym/jobs/ (JobManager, manager.py, and its parts), only its routes are here.
"""

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

import asyncio
import hashlib
import json
import logging
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, Body, SimpleResponsesAPIAgent
from nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.rollout_correlation import current_rollout_id, rollout_context
from pydantic import Field, PrivateAttr, ValidationError, field_validator

from prorl_gym.asgi import PlainASGIMiddleware, without_joining_ray
from prorl_gym.capture import CaptureGateway
from prorl_gym.capture.token_ledger import TokenLedger
from prorl_gym.config import StrictConfig, StrictServerConfig
from prorl_gym.dashboard.server import Dashboard, DashboardConfig
from prorl_gym.jobs.admission import JobError
from prorl_gym.jobs.aggregate import rollout_metrics
from prorl_gym.jobs.journal import Journal, JournalConfig
from prorl_gym.jobs.manager import JobManager
from prorl_gym.jobs.state import current_job_id
from prorl_gym.lifespan import run_with_app
from prorl_gym.pipeline.loop import LoopLimits
from prorl_gym.pipeline.peers import PeerClient
from prorl_gym.pipeline.policy import PolicyGate
from prorl_gym.pipeline.policy_health import PolicyHealth, PolicyHealthConfig
from prorl_gym.pipeline.rollout import (
    Peers,
    RetryPolicy,
    RolloutPipeline,
    RunRequest,
    SnapshotMode,
    transcript,
)
from prorl_gym.pipeline.stages import StagePool
from prorl_gym.supervise import supervised
from prorl_gym.tracing import Tracing, TracingConfig
from prorl_gym.wire.failures import Failure, FailureType, Stage
from prorl_gym.wire.jobs import (
    Batch,
    CancelResult,
    JobLimits,
    PolicyPause,
    PolicyResume,
    PolicyState,
    PolicyVersion,
    StopAfter,
    SubmitRequest,
)
from prorl_gym.wire.records import RolloutRecord, failed_record
from responses_api_agents.prorl_agent.front_door import FrontDoor, front_door_addresses
from responses_api_agents.prorl_agent.harness import HarnessLoop
from responses_api_agents.prorl_agent.harnesses import load_harness
from responses_api_agents.prorl_agent.prometheus import AgentMetrics
from responses_api_agents.prorl_agent.tracing import TracedClient, traced_pools, traced_rollout

log = logging.getLogger(__name__)


class HarnessConfig(StrictConfig):
    kind: str  # one of harnesses.KINDS
    # agent: in this agent's process, acting through the environment's tools; sandbox: inside the rollout's
    # sandbox, from a prepared environment the resources server binds there (its `harness_envs`)
    placement: Literal["agent", "sandbox"] = "agent"
    settings: dict[str, Any] = Field(default_factory=dict)  # the harness's own (see its class)


class ProRLAgentConfig(StrictServerConfig, BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    limits: LoopLimits = Field(default_factory=LoopLimits)
    max_init_workers: int = 16
    max_run_workers: int = 64
    max_eval_workers: int = 16
    init_timeout_s: float = 120.0
    run_timeout_s: float = 3600.0
    eval_timeout_s: float = 600.0
    release_timeout_s: float = 30.0
    retry: RetryPolicy = Field(default_factory=RetryPolicy)  # infrastructure failures run the rollout again
    # a policy with no healthy endpoint for policy_health.grace_s is declared down: told, not waited on
    policy_health: PolicyHealthConfig = Field(default_factory=PolicyHealthConfig)
    # staged: INIT, RUN and EVAL each have their own worker pool (the design of this agent).
    # coupled: max_run_workers workers each do INIT+RUN+EVAL of one rollout in turn; the design
    # staged pipelines replace, kept as the same-run baseline of benchmarks/pipeline_overlap.
    pipeline: Literal["staged", "coupled"] = "staged"
    jobs: JobLimits = Field(default_factory=JobLimits)  # bounds of the job API
    journal: JournalConfig = Field(default_factory=JournalConfig)  # where the job API's state survives a restart
    # every_turn: snapshot the sandbox after each turn, so that rollouts can branch from any turn (a row's
    # `prorl_snapshots`, or a job batch's `snapshots`, decides for itself).
    snapshots: SnapshotMode = "none"
    # The transcript sent to /verify carries the policy's token ids too (no verifier here reads them, and
    # they are most of its bytes: off saves the agent and the resources server their (de)serialization).
    verify_token_ids: bool = False
    # An existing agent harness as the RUN stage instead of this agent's loop (harness.py), e.g.
    # {kind: mini_swe_agent, settings: {config: mini}}; its model calls are captured with their ids.
    harness: HarnessConfig | None = None
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)  # GET /dashboard (prorl_gym/dashboard)
    tracing: TracingConfig = Field(default_factory=TracingConfig)  # OpenTelemetry spans per rollout: off unless set

    @field_validator("num_workers")
    @classmethod
    def _one_process(cls, value: int | None) -> int | None:
        if value not in (None, 1):  # stage pools and jobs live in the process: several would split them
            raise ValueError("the ProRL agent keeps its pipeline and jobs in one process: num_workers must be 1")
        return value


class ProRLAgent(PlainASGIMiddleware, SimpleResponsesAPIAgent):
    config: ProRLAgentConfig
    _pools: dict[Stage, StagePool] = PrivateAttr()
    _peers: PeerClient = PrivateAttr()
    _pipeline: RolloutPipeline = PrivateAttr()
    _jobs: JobManager = PrivateAttr()
    _metrics: AgentMetrics = PrivateAttr()
    _capture: CaptureGateway = PrivateAttr()
    _gate: PolicyGate = PrivateAttr()
    _health: PolicyHealth = PrivateAttr()
    _harness_threads: ThreadPoolExecutor | None = PrivateAttr(default=None)  # a harness's runs, if it has one
    _runs: set[asyncio.Future] = PrivateAttr(default_factory=set)  # /run rollouts in flight
    _stopping: asyncio.Future | None = PrivateAttr(default=None)  # done once a stop signal came
    _dashboard: Dashboard = PrivateAttr()
    # None: tracing off, and then the rollout path's whole cost of it is one `is None` check
    _tracing: Tracing | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        c = self.config
        workers = {Stage.INIT: c.max_init_workers, Stage.RUN: c.max_run_workers, Stage.EVAL: c.max_eval_workers}
        coupled = None
        if c.pipeline == "coupled":  # one slot per rollout, for all three stages
            coupled = asyncio.Semaphore(c.max_run_workers)
            workers = dict.fromkeys(workers, 1 << 20)
        timeouts = {Stage.INIT: c.init_timeout_s, Stage.RUN: c.run_timeout_s, Stage.EVAL: c.eval_timeout_s}
        self._pools = {stage: StagePool(stage, workers[stage], timeouts[stage]) for stage in Stage}
        # NeMo Gym 0.7's training-token capture on for this agent: its model calls go under capture's segment
        self._peers = PeerClient(self.server_client, token_capture=self._token_id_capture_enabled())
        peers = Peers(self._peers, c.resources_server.name, c.model_server.name)
        self._pipeline = RolloutPipeline(
            peers,
            self._pools,
            c.limits,
            c.retry,
            c.release_timeout_s,
            coupled,
            snapshots=c.snapshots,
            verify_token_ids=c.verify_token_ids,
        )
        self._health = PolicyHealth(c.policy_health, self._endpoints)
        self._pipeline.recovery.policy_down = self._health.down_message
        self._jobs = JobManager(
            self.rollout,
            c.jobs,
            journal=Journal(c.journal.path(c.name)),
            on_restart=c.journal.on_restart,
            environments=(c.resources_server.name, c.name),
            validate_row=RunRequest.model_validate,
            check_rows=self._pipeline.row_problems,
            stage_stats=self._stage_stats,
            release_snapshots=self._pipeline.release_snapshots,
            policy_version=lambda: self._gate.version,  # staleness is against the trainer's current version
            policy_health=self._health.view,
        )
        self._gate = self._pipeline.gate = PolicyGate(self._jobs.journal)
        self._gate.on_in_flight = self._jobs.stragglers.activity.set  # the policy's unused capacity (stragglers)
        self._metrics = AgentMetrics(self._jobs, self._gate, self._health)
        self._capture = CaptureGateway(self._peers, c.model_server.name, c.limits.policy_call_timeout_s, self._gate)
        if c.harness is not None:
            harness = load_harness(c.harness.kind, c.harness.settings, c.harness.placement)
            threads = self._harness_threads = ThreadPoolExecutor(c.max_run_workers, thread_name_prefix="harness")
            self._pipeline.harness_loop = lambda task, metadata, cookies: HarnessLoop(
                harness=harness,
                task=task,
                metadata=metadata,
                gateway=self._capture,
                agent_url="http://{}:{}".format(*self.listening_address()),
                client=self._peers,
                resources_server=c.resources_server.name,
                resources_cookies=cookies,
                limits=c.limits,
                threads=threads,
            )
        self._dashboard = Dashboard(
            self._jobs,
            c.dashboard,
            environment=c.resources_server.name,
            stages=self._stage_stats,
            peers=self._peers,
            resources_server=c.resources_server.name,
            model_server=c.model_server.name,
        )
        self._pipeline.on_attempt = self._on_attempt
        self._pipeline.on_wait = self._metrics.waited
        return super().model_post_init(context)

    @classmethod
    def run_webserver(cls):
        """As NeMo Gym's, under a supervisor that starts the agent again if it dies: its journal
        brings back every job (prorl_gym/supervise.py)."""
        return supervised(without_joining_ray(super().run_webserver), address=cls.listening_address)

    def body_limits(self) -> dict[str, int]:
        return {"/run": self.config.jobs.max_row_bytes, "/jobs": self.config.jobs.max_request_bytes}

    def setup_webserver(self):
        app = super().setup_webserver()
        # NeMo Gym 0.7 collects through the environment servers that name this agent: this process serves
        # their addresses (front_door.py), opened once the rest of the agent has started, closed first
        if doors := front_door_addresses(self.server_client.global_config_dict, self.config.name):
            front_door = FrontDoor(app, doors)
            run_with_app(app, front_door.start, front_door.close)
        self._mount_job_routes(app)
        app.include_router(self._capture.router())  # bring-your-own-agent harnesses call the policy here
        app.include_router(TokenLedger().router())  # NeMo Gym 0.7's token-capture transport (capture/token_ledger.py)
        self._metrics.mount(app)
        if self.config.dashboard.enabled:
            self._dashboard.mount(app)
            run_with_app(app, self._dashboard.start, self._dashboard.close)
        if self._tracing is None and self.config.tracing.enabled:
            self.start_tracing(Tracing(self.config.tracing))
        run_with_app(app, self._health.start, self._health.close)
        run_with_app(app, self._stop_runs_on_signals, self._close)
        return app

    def start_tracing(self, tracing: Tracing) -> None:
        """Spans per rollout from now on (a test passes a Tracing with its in-process exporter): the pools
        and the peer client are wrapped; nothing of this exists while tracing is off."""
        self._tracing = tracing
        traced_pools(self._pools, tracing)
        peers = self._pipeline.peers
        if not isinstance(peers.client, TracedClient):
            peers.client = TracedClient(peers.client, tracing, peers.model_server)
        if tracing.recent is not None:
            self._dashboard.spans_of = tracing.recent.of_job

    async def _endpoints(self) -> tuple[int, bytes]:
        """The model server's GET /endpoints, as the policy's health watch reads it."""
        response = await self._peers.get(server_name=self.config.model_server.name, url_path="/endpoints")
        return response.status, await response.read()

    def _stage_stats(self) -> dict:
        return {stage.value: pool.stats() for stage, pool in self._pools.items()}

    def _on_attempt(self, record: RolloutRecord) -> None:
        self._metrics.attempt(record)
        self._dashboard.counters.attempt(record)

    async def _close(self) -> None:
        """Let rollouts ended by the shutdown release their sandboxes, then close the connections."""
        if pending := [rollout for rollout in self._runs if not rollout.done()]:
            await asyncio.wait(pending, timeout=self.config.release_timeout_s)
        if self._harness_threads is not None:  # a harness still running ends at its next call (refused)
            self._harness_threads.shutdown(wait=False, cancel_futures=True)
        await self._peers.close()
        if self._tracing is not None:
            await asyncio.to_thread(self._tracing.close)  # flushes the exporter (HTTP): off the event loop

    def _stop_runs_on_signals(self) -> None:
        """On SIGINT/SIGTERM, answer every /run in flight with a shutdown record at once, then let the
        server's own handler (uvicorn's, installed before the app starts) stop it. Uvicorn cancels the
        requests still open 0.5 s later (NeMo Gym's grace) and NeMo Gym's middleware turns that into a
        500, so the answer must not wait for anything, not even the sandbox's release."""
        loop = asyncio.get_running_loop()
        self._stopping = loop.create_future()
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)

            def handler(signum, frame, previous=previous):
                loop.call_soon_threadsafe(self._end_runs)
                if callable(previous):
                    previous(signum, frame)

            signal.signal(sig, handler)

    def _end_runs(self) -> None:
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)
        for rollout in list(self._runs):
            rollout.cancel("the agent is shutting down")  # it releases its sandbox; close() waits for that

    # ------------------------------------------------------------------ /run: the pipeline

    async def run(self, request: Request, body: RunRequest) -> dict:
        # exclude_unset: a field the row left out must stay out (NeMo Gym's vllm_model
        # breaks on an explicit `metadata: null`).
        row = body.model_dump(exclude_unset=True)
        rollout = asyncio.ensure_future(self.rollout(row, dict(request.cookies)))
        self._runs.add(rollout)
        rollout.add_done_callback(self._runs.discard)
        try:
            stopping = [self._stopping] if self._stopping is not None else []
            await asyncio.wait([rollout, *stopping], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # uvicorn cancels the request before a stop signal reached us
            if (task := asyncio.current_task()) is not None:
                task.uncancel()
        if rollout.done() and not rollout.cancelled():
            self._dashboard.runs.add(rollout.result())  # the inspector's (the job API's are in its journal)
            return rollout.result().wire()
        rollout.cancel("the agent is shutting down")
        message = "the agent stopped while the rollout ran; its sandbox is released"
        return failed_record(row, Failure(stage=None, type=FailureType.SHUTDOWN, message=message, infra=True)).wire()

    async def rollout(self, row: dict, cookies: dict | None = None) -> RolloutRecord:
        # Its calls carry its rollout id where NeMo Gym's capture or observability is on (PeerClient): /run set
        # it from the row (NeMo Gym's rollout_context); a job's is its job id
        with rollout_context(current_rollout_id() or self._job_rollout_id()):
            if self._tracing is None:
                record = await self._pipeline.rollout(row, cookies)
            else:
                environment = self.config.resources_server.name
                rollout = lambda: self._pipeline.rollout(row, cookies)  # noqa: E731
                record = await traced_rollout(self._tracing, environment, rollout)
        self._metrics.finished(record)
        self._dashboard.counters.rollout(record)
        return record

    def _job_rollout_id(self) -> str | None:
        """The job API's rollout (its task names its job) as a NeMo Gym rollout id, where one is wanted."""
        if not self._capture_correlation_enabled() or (job_id := current_job_id()) is None:
            return None
        return rollout_id_of_job(job_id)

    # ------------------------------------------------------------------ /v1/responses: the loop alone

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming = Body()
    ) -> NeMoGymResponse:
        """RUN only, for callers that seed and verify themselves (NeMo Gym's agent contract)."""
        loop = self._pipeline.new_loop(body, await self._pipeline.tool_list(), dict(request.cookies))
        await loop.run()
        return transcript(loop)

    # ------------------------------------------------------------------ the job API (docs/job_api.md)

    def _mount_job_routes(self, app: FastAPI) -> None:
        jobs, gate = self._jobs, self._gate

        async def start() -> None:
            await jobs.start()
            await gate.restore()  # the version and pause the trainer last set

        run_with_app(app, start, jobs.close)  # at shutdown, running jobs are interrupted (run again at start)
        app.add_exception_handler(
            JobError, lambda _, exc: JSONResponse({"detail": exc.detail, **exc.extra}, exc.status)
        )

        @app.post("/jobs")
        async def submit(request: Request) -> Batch:
            body = await request.body()  # bounded by body_limits (413)
            try:
                batch = SubmitRequest.model_validate_json(body)
            except ValidationError as exc:
                errors = json.loads(exc.json(include_url=False, include_input=False))
                raise JobError(422, "invalid request", errors=errors) from None
            return await jobs.submit(batch)

        @app.get("/batches/{batch_id}/results")  # NDJSON, or server-sent events if asked for
        async def results(batch_id: str, request: Request, after: int = 0):
            records = self._health.told(jobs.follow(batch_id, after))  # with policy_down/policy_up events
            sse = "text/event-stream" in request.headers.get("accept", "")

            async def lines():  # None is a heartbeat
                async for line in records:
                    if sse:
                        yield f"data: {line}\n\n" if line is not None else ": heartbeat\n\n"
                    else:
                        yield f"{line or ''}\n"

            return StreamingResponse(lines(), media_type="text/event-stream" if sse else "application/x-ndjson")

        @app.post("/batches/{batch_id}/stop_after")
        async def stop_after(batch_id: str, body: StopAfter) -> CancelResult:
            return await jobs.stop_after(batch_id, body.k)

        app.get("/batches/{batch_id}")(jobs.batch)
        app.post("/batches/{batch_id}/cancel")(jobs.cancel_batch)
        app.post("/batches/{batch_id}/ack")(jobs.acknowledge)
        app.get("/jobs/{job_id:path}")(jobs.job)  # default job ids hold '/': <batch>/<row>/<sample>
        app.post("/jobs/{job_id:path}/cancel")(jobs.cancel_job)
        app.get("/status")(jobs.status)

        # The trainer's weight updates (prorl_gym/pipeline/policy.py): the version new policy calls are
        # sent under, and pause/resume around an update.
        @app.get("/policy")
        async def policy() -> PolicyState:
            return gate.state()

        @app.post("/policy/version")
        async def policy_version(body: PolicyVersion) -> PolicyState:
            return await gate.set_version(body.version)

        @app.post("/policy/pause")
        async def policy_pause(body: PolicyPause = Body(default_factory=PolicyPause)) -> PolicyState:
            return await gate.pause(body.abort_in_flight)

        @app.post("/policy/resume")
        async def policy_resume(body: PolicyResume = Body(default_factory=PolicyResume)) -> PolicyState:
            return await gate.resume(body.version)

    # ------------------------------------------------------------------ metrics

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return rollout_metrics([rollout for task in tasks for rollout in task])

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        keys = ("mean/reward", "mean_reward_valid", "failure_rate", "contiguous_fraction")
        return {k: v for k, v in agent_metrics.items() if k in keys or k.startswith("failures/")}


def rollout_id_of_job(job_id: str) -> str:
    """A job id as NeMo Gym's rollout id (a path segment: letters, digits, `.`, `_`, `-`): its own where it is
    one, else its characters outside that set replaced and a digest of it added (distinct jobs, distinct ids)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", job_id).lstrip("._-")
    if safe == job_id:
        return job_id
    return f"{safe or 'job'}-{hashlib.sha256(job_id.encode()).hexdigest()[:12]}"


if __name__ == "__main__":
    ProRLAgent.run_webserver()
