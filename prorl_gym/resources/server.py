# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Base class for sandboxed NeMo Gym resources servers (math, code, STEM, SWE).

Subclasses choose their tools in config and implement `evaluate`; this class owns the
session -> sandbox mapping, the tool routes, the verifier pool and the lifecycle:

    POST /seed_session  (INIT)  create the session's sandbox, stage the task
    GET  /tools                 the OpenAI function tools the policy may call
    POST /<tool>        (RUN)   run one tool call in the session's sandbox
    POST /verify        (EVAL)  score the final response, then close the sandbox
    POST /release               close the sandbox without scoring (failure paths)
"""

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import SESSION_ID_KEY
from pydantic import ConfigDict, Field, PrivateAttr

from prorl_gym.pipeline.failures import Failure, FailureType, Stage
from prorl_gym.resources.sessions import SandboxSessions, UnknownSessionError
from prorl_gym.resources.tools import TOOLS, Tool, ToolResult
from prorl_gym.sandbox import Sandbox, SandboxError, SandboxSpec
from prorl_gym.verify.pool import VerifierError, VerifierPool, VerifierTimeout

log = logging.getLogger(__name__)


class SandboxResourcesServerConfig(BaseResourcesServerConfig):
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    tools: list[str] = Field(default_factory=lambda: ["bash"])
    session_idle_ttl_s: float = 3600.0
    warm_pool_size: int = 0  # sandboxes started ahead, so INIT is an acquire
    verifier_workers: int = 0  # 0: this environment does not use the verifier pool
    verify_timeout_s: float = 20.0
    # When the python tool is offered, start each sandbox's Python kernel in the background
    # as soon as the sandbox exists (at INIT, or in the warm pool) instead of in the first call.
    prestart_kernel: bool = True
    eval_delay_s: float = 0.0  # added to every EVAL: stands in for a slow verifier (benchmarks/pipeline_overlap)


class SeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")  # the whole dataset row


class SeedSessionResponse(BaseSeedSessionResponse):
    sandbox_id: str


class SandboxVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class SandboxVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")
    failure: Failure | None = None


def error_response(status: int, type_: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"type": type_, "message": message}})


class SandboxResourcesServer(SimpleResourcesServer):
    config: SandboxResourcesServerConfig
    _sessions: SandboxSessions = PrivateAttr()
    _verifiers: VerifierPool | None = PrivateAttr(default=None)
    _tools: list[Tool] = PrivateAttr(default_factory=list)

    # ------------------------------------------------------------------ set-up

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()  # session middleware, /seed_session, /verify, /aggregate_metrics
        extra = {tool.name: tool for tool in self.extra_tools()}
        unknown = [name for name in self.config.tools if name not in TOOLS and name not in extra]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOLS | extra)}")
        self._tools = [extra.get(name) or TOOLS[name] for name in self.config.tools]
        self._sessions = SandboxSessions(
            self.config.sandbox,
            idle_ttl_s=self.config.session_idle_ttl_s,
            pool_size=self.config.warm_pool_size,
            warm_kernels=self.config.prestart_kernel and "python" in self.config.tools,
        )
        if self.config.verifier_workers:
            self._verifiers = VerifierPool(self.config.verifier_workers, timeout_s=self.config.verify_timeout_s)
        app.get("/tools")(self.list_tools)
        app.post("/release")(self.release)
        for tool in self._tools:
            app.post(f"/{tool.name}")(self._tool_route(tool))

        inner_lifespan = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(app_: FastAPI):
            await self._sessions.start()
            if self._verifiers:
                await self._verifiers.start()
            try:
                async with inner_lifespan(app_) as state:
                    yield state
            finally:
                await self._sessions.close()
                if self._verifiers:
                    await self._verifiers.close()

        app.router.lifespan_context = lifespan
        return app

    @property
    def verifiers(self) -> VerifierPool:
        assert self._verifiers is not None, "set verifier_workers > 0 to use the verifier pool"
        return self._verifiers

    # ------------------------------------------------------------------ hooks for subclasses

    def extra_tools(self) -> list[Tool]:
        """Tools of this environment beyond the shared ones (e.g. search over its corpus);
        offered when listed in config `tools`. Their handler gets the session's sandbox."""
        return []

    async def sandbox_spec(self, row: SeedSessionRequest) -> SandboxSpec:
        """The sandbox this task needs (e.g. its repository bound in, its image). Default: the config's."""
        return self.config.sandbox

    async def stage_task(self, sandbox: Sandbox, row: SeedSessionRequest) -> None:
        """INIT: put the task into the fresh sandbox (files, repositories). Default: nothing."""

    async def evaluate(self, body: SandboxVerifyRequest, sandbox: Sandbox | None) -> dict[str, Any]:
        """EVAL: return at least {"reward": float}; may use the sandbox before it is closed."""
        raise NotImplementedError

    # ------------------------------------------------------------------ routes

    async def seed_session(self, request: Request, body: SeedSessionRequest):
        session_id = request.session[SESSION_ID_KEY]
        try:
            sandbox = await self._sessions.create(session_id, await self.sandbox_spec(body))
            await self.stage_task(sandbox, body)
        except SandboxError as exc:
            await self._sessions.release(session_id)
            return error_response(503, "sandbox_error", str(exc))
        except Exception as exc:
            await self._sessions.release(session_id)
            log.exception("staging the task failed")
            return error_response(500, "init_error", f"{type(exc).__name__}: {exc}")
        return SeedSessionResponse(sandbox_id=sandbox.id)

    async def list_tools(self) -> list[dict]:
        return [tool.schema() for tool in self._tools]

    async def release(self, request: Request) -> dict:
        return {"released": await self._sessions.release(request.session[SESSION_ID_KEY])}

    def _tool_route(self, tool: Tool):
        async def route(request: Request, body: tool.args) -> ToolResult:  # type: ignore[name-defined]
            try:
                sandbox = self._sessions.get(request.session[SESSION_ID_KEY])
                return await tool.run(sandbox, body)
            except UnknownSessionError as exc:
                return error_response(409, "unknown_session", str(exc))
            except SandboxError as exc:
                return error_response(503, "sandbox_error", str(exc))

        route.__name__ = tool.name
        return route

    async def verify(self, request: Request, body: SandboxVerifyRequest) -> SandboxVerifyResponse:
        session_id = request.session[SESSION_ID_KEY]
        try:
            if self.config.eval_delay_s:
                await asyncio.sleep(self.config.eval_delay_s)
            fields = await self.evaluate(body, self._sessions.find(session_id))
        except VerifierTimeout as exc:
            fields = {"reward": 0.0, "failure": Failure(stage=Stage.EVAL, type=FailureType.TIMEOUT, message=str(exc))}
        except (TimeoutError, VerifierError, SandboxError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            fields = {
                "reward": 0.0,
                "failure": Failure(stage=Stage.EVAL, type=FailureType.EVAL_ERROR, message=message),
            }
        finally:
            await self._sessions.release(session_id)
        return SandboxVerifyResponse(**(body.model_dump() | fields))
