# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Base class for sandboxed NeMo Gym resources servers (math, code, STEM, SWE).

An environment subclasses it, names its row and result models as class attributes, lists
its tools in config and implements `evaluate`; this class owns the session -> sandbox
mapping, the tool routes, the verifier pool and the lifecycle:

    POST /seed_session  (INIT)  create the session's sandbox, stage the task
    GET  /tools                 the OpenAI function tools the policy may call, and which end a rollout
    POST /<tool>        (RUN)   run one tool call in the session's sandbox
    POST /harness       (RUN)   or run an agent harness inside it (resources/harness.py)
    POST /verify        (EVAL)  score the final response, then close the sandbox
    POST /release               close the sandbox without scoring (failure paths)
"""

# No `from __future__ import annotations`: FastAPI reads the tool routes' body types from their annotations.
import logging
import time
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import SESSION_ID_KEY
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from prorl_gym.asgi import PlainASGIMiddleware, without_joining_ray
from prorl_gym.config import StrictConfig, StrictServerConfig
from prorl_gym.lifespan import run_with_app
from prorl_gym.prometheus import ServerMetrics
from prorl_gym.resources.harness import harness_env_binds, run_harness
from prorl_gym.resources.sessions import SandboxSessions, UnknownSessionError
from prorl_gym.resources.shared_init import SharedInit, default_init_key
from prorl_gym.resources.snapshots import SnapshotStore, UnknownSnapshotError
from prorl_gym.resources.tools import TOOLS, Tool, ToolResult
from prorl_gym.sandbox import Backends, SandboxAPI, SandboxError, SandboxLostError, SandboxSpec
from prorl_gym.supervise import supervised
from prorl_gym.verify.pool import VerifierCrashed, VerifierError, VerifierPool, VerifierTimeout
from prorl_gym.verify.transcript import count_tool_calls
from prorl_gym.wire.failures import Failure, FailureType, Stage
from prorl_gym.wire.records import ReportFields
from prorl_gym.wire.resources import (
    SANDBOX_ERROR,
    SANDBOX_LOST_ERROR,
    SNAPSHOT_KEY,
    CheckRowsRequest,
    CheckRowsResponse,
    HarnessRunRequest,
    HarnessRunResponse,
    ReleaseSnapshotsRequest,
    RowProblem,
    SeedSessionResponse,
    SnapshotResponse,
    ToolsResponse,
)

log = logging.getLogger(__name__)


class SandboxResourcesServerConfig(StrictServerConfig, BaseResourcesServerConfig):
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    tools: list[str] = Field(default_factory=lambda: ["bash"])  # the one list: schemas and prompts come from it
    report: ReportFields = Field(default_factory=ReportFields)  # its record fields the evaluation report summarises
    session_idle_ttl_s: float = 3600.0
    warm_pool_size: int = 0  # sandboxes started ahead, so INIT is an acquire
    verifier_workers: int = 0  # 0: this environment does not use the verifier pool
    verify_timeout_s: float = 20.0
    # When the python tool is offered, start each sandbox's Python kernel in the background
    # as soon as the sandbox exists (at INIT, or in the warm pool) instead of in the first call.
    prestart_kernel: bool = True
    # INIT once per task: the rollouts of one task (a group's samples, repeats) start from forks of
    # one staged sandbox (resources/shared_init.py). Worth it where staging costs (SWE).
    share_init: bool = False
    share_init_ttl_s: float = 300.0  # a task's template is closed after this long without a new rollout
    share_init_max_templates: int = 64
    snapshot_ttl_s: float = 3600.0  # a snapshot (to branch rollouts from) not released by then is released
    # Prepared environments of agent harnesses that run inside this server's sandboxes (POST /harness),
    # by name (.venvs/harnesses/<name>): bound read-only into every sandbox.
    harness_envs: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _bind_harness_envs(self) -> "SandboxResourcesServerConfig":
        binds = [b for b in harness_env_binds(self.harness_envs) if b.src not in {x.src for x in self.sandbox.binds}]
        self.sandbox = self.sandbox.model_copy(update={"binds": [*self.sandbox.binds, *binds]})
        return self


class SeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")  # the whole dataset row


class SandboxVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class SandboxVerifyResponse(BaseVerifyResponse):
    """What every environment's /verify returns; environments add their own fields in a subclass."""

    model_config = ConfigDict(extra="allow")  # the row's own fields pass through
    failure: Failure | None = None  # set when the verifier could not judge: never a silent reward of 0
    num_tool_calls: int = 0


def eval_failure(exc: Exception) -> Failure:
    """Why a verify could not judge. The machinery's failures (a worker crashed or hung, the eval
    sandbox died) are the infrastructure's and worth a new attempt; a check that raised on this
    row's data (a malformed answer spec, an unknown checker) would raise again."""
    if isinstance(exc, SandboxLostError):  # the eval sandbox's host or node died
        return Failure(stage=Stage.EVAL, type=FailureType.SANDBOX_LOST, message=str(exc), infra=True)
    kind = FailureType.TIMEOUT if isinstance(exc, (VerifierTimeout, TimeoutError)) else FailureType.EVAL_ERROR
    infra = not isinstance(exc, VerifierError) or isinstance(exc, (VerifierTimeout, VerifierCrashed))
    return Failure(stage=Stage.EVAL, type=kind, message=f"{type(exc).__name__}: {exc}", infra=infra)


def sandbox_error_type(exc: SandboxError) -> str:
    return SANDBOX_LOST_ERROR if isinstance(exc, SandboxLostError) else SANDBOX_ERROR


def error_response(status: int, type_: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"type": type_, "message": message}})


def _route(method, body_type: type[BaseModel]):
    """`method(self, request, body)` as a route whose body FastAPI validates as `body_type`."""

    async def route(self, request: Request, body):
        result = await method(self, request, body)
        if isinstance(result, BaseModel):
            # Serialised by pydantic in one pass: without a response model FastAPI would walk the
            # whole transcript (every token id) in Python (jsonable_encoder), ~12% of this server's CPU.
            return Response(result.model_dump_json(by_alias=True), media_type="application/json")
        return result

    # Annotations, not a __signature__: NeMo Gym 0.7 wraps /verify (judge_failsafe, functools.wraps of the bound
    # method), which would copy a __signature__ that still names `self` (FastAPI: a required query parameter)
    route.__annotations__ = {"request": Request, "body": body_type}
    route.__name__ = route.__qualname__ = method.__name__.lstrip("_")
    route.__doc__ = method.__doc__
    return route


class DrainRequest(StrictConfig):
    host: str  # a host's name or node, as /status lists them
    draining: bool = True


class SandboxResourcesServer(PlainASGIMiddleware, SimpleResourcesServer):
    config: SandboxResourcesServerConfig
    # An environment's row and result models: the routes validate with them.
    seed_request: ClassVar[type[SeedSessionRequest]] = SeedSessionRequest
    verify_request: ClassVar[type[SandboxVerifyRequest]] = SandboxVerifyRequest
    verify_response: ClassVar[type[SandboxVerifyResponse]] = SandboxVerifyResponse
    _sessions: SandboxSessions = PrivateAttr()
    _verifiers: VerifierPool | None = PrivateAttr(default=None)
    _tools: list[Tool] = PrivateAttr(default_factory=list)
    _metrics: ServerMetrics = PrivateAttr()
    _tool_seconds: Any = PrivateAttr()
    _verify_seconds: Any = PrivateAttr()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._type_routes()

    @classmethod
    def _type_routes(cls) -> None:
        cls.seed_session = _route(cls._seed_session, cls.seed_request)
        cls.verify = _route(cls._verify, cls.verify_request)

    # ------------------------------------------------------------------ set-up

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()  # session middleware, /seed_session, /verify, /aggregate_metrics
        self._tools = self.resolve_tools(self.config.tools)
        self._sessions = SandboxSessions(
            self.config.sandbox,
            idle_ttl_s=self.config.session_idle_ttl_s,
            pool_size=self.config.warm_pool_size,
            warm_kernels=self.config.prestart_kernel and "python" in self.config.tools,
            shared_init=SharedInit(c.share_init_ttl_s, c.share_init_max_templates)
            if (c := self.config).share_init
            else None,
            snapshots=SnapshotStore(c.snapshot_ttl_s),
        )
        if self.config.verifier_workers:
            self._verifiers = VerifierPool(
                self.config.verifier_workers, timeout_s=self.config.verify_timeout_s, preload=self.verifier_checks()
            )
        self._metrics = self.setup_metrics()
        self._metrics.mount(app)
        app.get("/tools")(self.list_tools)
        app.post("/check_rows")(self.check_rows)
        app.post("/release")(self.release)
        app.post("/snapshot")(self.snapshot)
        app.post("/snapshots/release")(self.release_snapshots)
        app.post("/harness")(self.run_harness)
        app.get("/status")(self.status)
        app.post("/hosts/drain")(self.drain_host)
        routes = {getattr(route, "path", "").strip("/").split("/")[0] for route in app.routes}
        for tool in self._tools:
            if tool.name in routes:  # the tool would shadow the route, or the route the tool
                raise ValueError(
                    f"tool {tool.name!r} is named like a route of the server (/{tool.name}); rename it "
                    f"(taken: {', '.join(sorted(r for r in routes if r))})"
                )
            app.post(f"/{tool.name}")(self._tool_route(tool))
        run_with_app(app, self._start, self._close)
        return app

    async def _start(self) -> None:
        await self._sessions.start()
        if self._verifiers:
            await self._verifiers.start()

    async def _close(self) -> None:
        await self._sessions.close()
        if self._verifiers:
            await self._verifiers.close()

    @classmethod
    def run_webserver(cls):
        """As NeMo Gym's, under a supervisor that starts the server again if it dies (prorl_gym/supervise.py)."""
        return supervised(without_joining_ray(super().run_webserver), address=cls.listening_address)

    def setup_metrics(self) -> ServerMetrics:
        """GET /metrics: live sandboxes, starts, kernels, tool calls and verifies (subclasses may add)."""
        m = ServerMetrics()
        m.gauge("prorl_sandboxes_live", "Sandboxes held by sessions").set_function(lambda: len(self._sessions))
        counts = self._sessions.counts
        m.counter_function("prorl_sandbox_starts_total", "Sandboxes started", lambda: counts["started"])
        m.counter_function(
            "prorl_sandbox_start_failures_total", "Sandboxes that failed to start", lambda: counts["start_failures"]
        )
        m.counter_function(
            "prorl_kernel_starts_total",
            "Python kernels started (counted when their sandbox closes)",
            lambda: counts["kernels"],
        )
        self._tool_seconds = m.histogram(
            "prorl_tool_call_seconds", "Tool calls by tool and outcome", ("tool", "outcome")
        )
        self._verify_seconds = m.histogram(
            "prorl_verify_seconds", "Verifies by outcome: ok, or the failure type", ("outcome",)
        )
        return m

    @property
    def backends(self) -> Backends:
        """This server's sandbox backend instances: an evaluator's fresh sandbox starts through them
        (create_sandbox(spec, backends=self.backends)), on the same hosts as the sessions'."""
        return self._sessions.backends

    @property
    def verifiers(self) -> VerifierPool:
        assert self._verifiers is not None, "set verifier_workers > 0 to use the verifier pool"
        return self._verifiers

    @classmethod
    def resolve_tools(cls, names: list[str]) -> list[Tool]:
        """The Tool objects for the config's `tools` (shared ones and this environment's own)."""
        known = TOOLS | {tool.name: tool for tool in cls.environment_tools()}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(known)}")
        for name in names:
            run = known[name].run
            if isinstance(run, str) and not callable(getattr(cls, run, None)):
                raise ValueError(f"tool {name!r} runs {run!r}, which {cls.__name__} has no method named")
        return [known[name] for name in names]

    # ------------------------------------------------------------------ hooks for subclasses

    @classmethod
    def environment_tools(cls) -> list[Tool]:
        """Tools of this environment beyond the shared ones (e.g. search over its corpus),
        offered when listed in config `tools`. A handler that needs the server is a method
        named in the tool's `run` as a string (resolved in `_tool_route`). A tool may not be
        named like one of the server's routes (seed_session, verify, tools, metrics, ...)."""
        return []

    def verifier_checks(self) -> list[str]:
        """`module:function` checks the verifier workers import at start (the pool runs any on demand)."""
        return []

    async def sandbox_spec(self, row: SeedSessionRequest) -> SandboxSpec:
        """The sandbox this task needs (e.g. its repository bound in, its image). Default: the config's."""
        return self.config.sandbox

    async def stage_task(self, sandbox: SandboxAPI, row: SeedSessionRequest) -> None:
        """INIT: put the task into the fresh sandbox (files, repositories). Default: nothing."""

    def init_key(self, row: SeedSessionRequest) -> str:
        """Rows with the same key are staged alike (share_init forks one staged sandbox for them)."""
        return default_init_key(row.model_dump(mode="json"))

    async def evaluate(self, body: SandboxVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        """EVAL: return at least {"reward": float} and the fields of `verify_response`; may use the
        sandbox before it is closed."""
        raise NotImplementedError

    # ------------------------------------------------------------------ routes

    async def _seed_session(self, request: Request, body: SeedSessionRequest):
        session_id = request.session[SESSION_ID_KEY]
        try:
            snapshot_id = (body.model_extra or {}).get(SNAPSHOT_KEY)
            if snapshot_id is not None:  # a branch: the sandbox as it was at a turn of another rollout
                sandbox = await self._sessions.create_branch(session_id, str(snapshot_id))
                return SeedSessionResponse(sandbox_id=sandbox.id, host=sandbox.host)
            spec = await self.sandbox_spec(body)
            if self._sessions.shared_init is not None:
                stage = lambda sandbox: self.stage_task(sandbox, body)  # noqa: E731
                sandbox = await self._sessions.create_shared(session_id, self.init_key(body), spec, stage)
            else:
                sandbox = await self._sessions.create(session_id, spec)
                await self.stage_task(sandbox, body)
        except SandboxError as exc:
            await self._sessions.release(session_id)
            return error_response(503, sandbox_error_type(exc), str(exc))
        except UnknownSnapshotError as exc:
            return error_response(404, "unknown_snapshot", str(exc))
        except Exception as exc:
            await self._sessions.release(session_id)
            log.exception("staging the task failed")
            return error_response(500, "init_error", f"{type(exc).__name__}: {exc}")
        return SeedSessionResponse(sandbox_id=sandbox.id, host=sandbox.host)

    async def list_tools(self) -> ToolsResponse:
        return ToolsResponse(
            tools=[tool.schema() for tool in self._tools],
            ends_rollout=[tool.name for tool in self._tools if tool.ends_rollout],
        )

    async def check_rows(self, body: CheckRowsRequest) -> CheckRowsResponse:
        """Each row against this environment's row model, as /seed_session would take it."""
        problems = []
        for index, row in enumerate(body.rows):
            try:
                self.seed_request.model_validate(row)
            except ValidationError as exc:
                error = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}" for e in exc.errors())
                problems.append(RowProblem(index=index, error=error[:500]))
        return CheckRowsResponse(problems=problems)

    async def status(self) -> dict[str, Any]:
        """Live sandboxes, and per sandbox host: live sandboxes, capacity, health, failures."""
        status = {"live_sandboxes": len(self._sessions), "hosts": await self._sessions.hosts()}
        if (shared := self._sessions.shared_init) is not None:
            status["shared_init"] = {"live_templates": len(shared), **shared.counts}
        status["snapshots"] = {"live": len(self._sessions.snapshots), **self._sessions.snapshots.counts}
        return status

    async def drain_host(self, body: DrainRequest):
        """Planned maintenance: no new sandboxes on this host (`draining: false` resumes); its running
        sandboxes finish."""
        try:
            return await self._sessions.drain(body.host, body.draining)
        except KeyError as exc:
            return error_response(404, "unknown_host", str(exc.args[0]))

    async def release(self, request: Request) -> dict:
        return {"released": await self._sessions.release(request.session[SESSION_ID_KEY])}

    async def snapshot(self, request: Request):
        """Freeze the session's sandbox as it is now (between turns) for branches to start from."""
        try:
            sandbox = self._sessions.get(request.session[SESSION_ID_KEY])
            return SnapshotResponse(snapshot_id=await self._sessions.snapshots.take(sandbox))
        except UnknownSessionError as exc:
            return error_response(409, "unknown_session", str(exc))
        except SandboxError as exc:
            return error_response(503, sandbox_error_type(exc), str(exc))

    async def release_snapshots(self, body: ReleaseSnapshotsRequest) -> dict:
        return {"released": await self._sessions.snapshots.release(body.snapshot_ids)}

    async def run_harness(self, request: Request, body: HarnessRunRequest):
        """Run an agent harness inside the session's sandbox (resources/harness.py) until it exits or
        its time is up; the environment's /verify grades the sandbox's state after, as for any agent."""
        if body.harness_env not in self.config.harness_envs:
            known = self.config.harness_envs or "none"
            return error_response(422, "unknown_harness_env", f"{body.harness_env!r} is not bound here ({known})")
        try:
            sandbox = self._sessions.get(request.session[SESSION_ID_KEY])
            result: HarnessRunResponse = await run_harness(sandbox, body)
        except UnknownSessionError as exc:
            return error_response(409, "unknown_session", str(exc))
        except SandboxError as exc:
            return error_response(503, sandbox_error_type(exc), str(exc))
        except NotImplementedError as exc:
            return error_response(501, "harness_unsupported", str(exc))
        return result

    def _tool_route(self, tool: Tool):
        run = getattr(self, tool.run) if isinstance(tool.run, str) else tool.run

        async def route(request: Request, body: tool.args) -> ToolResult:  # type: ignore[name-defined]
            started, outcome = time.perf_counter(), "ok"
            try:
                sandbox = self._sessions.get(request.session[SESSION_ID_KEY])
                return await run(sandbox, body)
            except UnknownSessionError as exc:
                outcome = "unknown_session"
                return error_response(409, outcome, str(exc))
            except SandboxError as exc:
                outcome = sandbox_error_type(exc)
                return error_response(503, outcome, str(exc))
            finally:
                self._tool_seconds.labels(tool.name, outcome).observe(time.perf_counter() - started)

        route.__name__ = tool.name
        return route

    async def _verify(self, request: Request, body: SandboxVerifyRequest) -> SandboxVerifyResponse:
        session_id, started = request.session[SESSION_ID_KEY], time.perf_counter()
        try:
            fields = await self.evaluate(body, self._sessions.find(session_id))
        except (VerifierError, SandboxError, TimeoutError) as exc:
            fields = {"reward": 0.0, "failure": eval_failure(exc)}
        finally:
            await self._sessions.release(session_id)
        fields = {"num_tool_calls": count_tool_calls(body.response)} | fields
        outcome = fields["failure"].type.value if fields.get("failure") else "ok"
        self._verify_seconds.labels(outcome).observe(time.perf_counter() - started)
        return self.verify_response.model_validate(body.model_dump() | fields)


SandboxResourcesServer._type_routes()
