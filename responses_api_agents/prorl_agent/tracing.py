# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's spans (prorl_gym/tracing.py): wrappers put around its pools and its peer client only
when tracing is on, so the rollout code itself (rollout.py, loop.py) knows nothing of them.

    rollout                     job id, environment, host, sandbox, reward, failure, attempts
      INIT                      queue wait; the stage's own failure
        seed_session            host, sandbox
      RUN
        policy call             output tokens, HTTP status
        tool call               tool name, arguments (clipped), HTTP status
      EVAL
        verify                  reward, failure

Spans parent through contextvars: a stage runs in its rollout's task, and a task started inside one
(INIT's seed) copies the context. Calls outside a rollout (health checks) are not traced.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable
from typing import Any

from prorl_gym.jobs.state import current_job_id
from prorl_gym.tracing import (
    ARGUMENTS,
    ATTEMPTS,
    ENVIRONMENT,
    FAILURE,
    HOST,
    JOB_ID,
    OUTPUT_TOKENS,
    REWARD,
    SANDBOX,
    STAGE,
    STATUS,
    TOOL,
    Tracing,
    clip,
    set_error,
)
from prorl_gym.wire.failures import RolloutFailure
from prorl_gym.wire.records import RolloutRecord

# The rollout span of the current task: a peer call outside one (a health check) is not traced.
_ROLLOUT_SPAN: contextvars.ContextVar[Any] = contextvars.ContextVar("prorl_rollout_span", default=None)
# Resources-server paths that are not tool calls, and their span names.
RESOURCE_CALLS = {"/seed_session": "seed_session", "/verify": "verify", "/release": "release", "/snapshot": "snapshot"}


async def traced_rollout(
    tracing: Tracing, environment: str, rollout: Callable[[], Awaitable[RolloutRecord]]
) -> RolloutRecord:
    attributes = {ENVIRONMENT: environment}
    if (job_id := current_job_id()) is not None:
        attributes[JOB_ID] = job_id
    with tracing.span("rollout", attributes) as span:
        token = _ROLLOUT_SPAN.set(span)
        try:
            record = await rollout()
        finally:
            _ROLLOUT_SPAN.reset(token)
        span.set_attribute(REWARD, record.reward)
        span.set_attribute(ATTEMPTS, record.attempts)
        if record.host:
            span.set_attribute(HOST, record.host)
        if record.failure is not None:
            span.set_attribute(FAILURE, record.failure.type.value)
            set_error(span, record.failure.message)
        return record


class TracedStage:
    """A StagePool's run() inside a span named after its stage; everything else is the pool's."""

    def __init__(self, pool: Any, tracing: Tracing):
        self._pool, self._tracing = pool, tracing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def run(self, fn, timings: dict[str, float]):
        stage = self._pool.stage
        if _ROLLOUT_SPAN.get() is None:
            return await self._pool.run(fn, timings)
        with self._tracing.span(str(stage.value).upper(), {STAGE: stage.value}) as span:
            try:
                return await self._pool.run(fn, timings)
            except RolloutFailure as exc:
                span.set_attribute(FAILURE, exc.failure.type.value)
                set_error(span, exc.failure.message)
                raise
            finally:
                if (queued := timings.get(f"{stage}_queue_s")) is not None:
                    span.set_attribute("prorl.queue_s", queued)


class _TracedResponse:
    """A peer's response whose read() ends the call's span (the body is part of the call)."""

    def __init__(self, response: Any, finish: Callable[[Any, bytes], None]):
        self._response, self._finish = response, finish

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    async def read(self) -> bytes:
        payload = b""
        try:
            payload = await self._response.read()
            return payload
        finally:
            self._finish(self._response, payload)


class TracedClient:
    """The agent's peer client (PeerClient's post/get), each call of a rollout in a span."""

    def __init__(self, client: Any, tracing: Tracing, model_server: str):
        self._client, self._tracing, self._model_server = client, tracing, model_server

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def get(self, server_name: str, url_path: str, **kwargs):
        return await self._client.get(server_name, url_path, **kwargs)

    async def post(self, server_name: str, url_path: str, json: Any = None, cookies: dict | None = None, **kwargs):
        rollout = _ROLLOUT_SPAN.get()
        if rollout is None:
            return await self._client.post(server_name, url_path, json=json, cookies=cookies, **kwargs)
        if server_name == self._model_server:
            name, attributes = "policy call", {}
        elif url_path in RESOURCE_CALLS:
            name, attributes = RESOURCE_CALLS[url_path], {}
        else:
            tool = url_path.lstrip("/")
            name, attributes = "tool call", {TOOL: tool, ARGUMENTS: clip(_text(json))}
        span = self._tracing.tracer.start_span(name, attributes=attributes)
        from opentelemetry import trace

        with trace.use_span(span, end_on_exit=False, record_exception=False):
            try:
                response = await self._client.post(server_name, url_path, json=json, cookies=cookies, **kwargs)
            except BaseException as exc:
                set_error(span, repr(exc))
                span.end()
                raise

        def finish(raw: Any, payload: bytes) -> None:
            span.set_attribute(STATUS, raw.status)
            if raw.status >= 400:
                set_error(span, payload[:300].decode(errors="replace"))
            elif name in ("policy call", "seed_session", "verify"):
                _annotate(span, rollout, name, payload)
            span.end()

        return _TracedResponse(response, finish)


def _annotate(span: Any, rollout: Any, name: str, payload: bytes) -> None:
    """What the answer says that a trace reader wants: tokens, where the sandbox is, the reward."""
    try:
        answer = json.loads(payload)
    except ValueError:
        return
    if not isinstance(answer, dict):
        return
    if name == "policy call" and isinstance(usage := answer.get("usage"), dict):
        span.set_attribute(OUTPUT_TOKENS, int(usage.get("output_tokens") or 0))
    elif name == "seed_session":
        for key, attribute in (("host", HOST), ("sandbox_id", SANDBOX)):
            if answer.get(key):
                span.set_attribute(attribute, str(answer[key]))
                rollout.set_attribute(attribute, str(answer[key]))
    elif name == "verify":
        if isinstance(answer.get("reward"), (int, float)):
            span.set_attribute(REWARD, float(answer["reward"]))
        if isinstance(failure := answer.get("failure"), dict) and failure.get("type"):
            span.set_attribute(FAILURE, str(failure["type"]))


def _text(body: Any) -> str:
    try:
        return json.dumps(body) if not isinstance(body, str) else body
    except (TypeError, ValueError):
        return repr(body)


def traced_pools(pools: dict, tracing: Tracing) -> None:
    """Wrap each stage's pool in place (the pipeline and /status hold this same dict)."""
    for stage, pool in pools.items():
        if not isinstance(pool, TracedStage):
            pools[stage] = TracedStage(pool, tracing)
