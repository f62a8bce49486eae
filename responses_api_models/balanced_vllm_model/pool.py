# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The async side of the balancer: HTTP to the endpoints, health checks, leases, cancellation.

Every policy call runs as its own task and the handler waits for the first of: the call's
result, the death of its endpoint (the call is cancelled and answered 503 at once), or
request_timeout_s (cancelled, 504). So neither a dead nor a hung endpoint can hold a
rollout until the agent's own policy timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import orjson
from aiohttp import (
    ClientConnectionError,
    ClientConnectorError,
    ClientError,
    ClientOSError,
    ClientPayloadError,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    ConnectionTimeoutError,
    DummyCookieJar,
    ServerDisconnectedError,
    TCPConnector,
)
from pydantic import BaseModel, Field
from yarl import URL

from responses_api_models.balanced_vllm_model.balancer import Balancer, Endpoint, Unavailable, normalize_url
from responses_api_models.balanced_vllm_model.client import EndpointClient

log = logging.getLogger(__name__)
T = TypeVar("T")
CONNECT_RETRY_SLEEP_S = 0.5


class BalancerSettings(BaseModel):
    health_interval_s: float = Field(5.0, gt=0, description="pause between health-check rounds")
    health_timeout_s: float = Field(5.0, gt=0, description="one health check's time limit")
    # Relative to the base URL ("models" -> {base}/models), or from the host root ("/health",
    # vLLM's engine check).
    health_path: str = "models"
    unhealthy_after: int = Field(3, ge=1, description="consecutive failures that declare an endpoint dead")
    # Bounds every policy call (chat completion + /tokenize); keep it <= the agent's policy_call_timeout_s.
    request_timeout_s: float = Field(600.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    connect_attempts: int = Field(3, ge=1, description="tries of one call on connection errors")
    session_idle_s: float = Field(3600.0, gt=0, description="a session binding unused this long is dropped")
    max_sessions: int = Field(100_000, ge=1, description="session bindings kept (least recently used dropped)")
    max_connections_per_endpoint: int = Field(1024, ge=1)


@dataclass
class Lease:
    endpoint: Endpoint
    died: asyncio.Future[str]  # resolved (with the reason) when the endpoint's incarnation ends


class EndpointPool:
    def __init__(self, settings: BalancerSettings, api_key: str, default_headers: dict[str, str], urls: list[str]):
        self.settings = settings
        self._api_key = api_key
        self._default_headers = default_headers
        self.balancer = Balancer(settings.unhealthy_after, settings.max_sessions, settings.session_idle_s)
        self._died: dict[Endpoint, asyncio.Future[str]] = {}
        self._session: ClientSession | None = None
        self._health_session: ClientSession | None = None
        self._health_task: asyncio.Task[None] | None = None
        for url in urls:
            self.add(url)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        s = self.settings
        self._session = ClientSession(
            connector=TCPConnector(limit=0, limit_per_host=s.max_connections_per_endpoint),
            timeout=ClientTimeout(total=None, sock_connect=s.connect_timeout_s),  # run() bounds the whole call
            cookie_jar=DummyCookieJar(),
        )
        # Separate connections, so health checks never queue behind generations.
        self._health_session = ClientSession(
            timeout=ClientTimeout(total=s.health_timeout_s), cookie_jar=DummyCookieJar()
        )
        self._health_task = asyncio.create_task(self._health_loop(), name="policy-endpoint-health")

    async def close(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            await asyncio.gather(self._health_task, return_exceptions=True)
            self._health_task = None
        for endpoint in list(self._died):
            self._signal(endpoint, "is unavailable: the model server is shutting down")
        for session in (self._session, self._health_session):
            if session is not None:
                await session.close()
        self._session = self._health_session = None

    # ------------------------------------------------------------------ membership
    def add(self, url: str, healthy: bool = True) -> Endpoint:
        endpoint = self.balancer.add(url, healthy)
        endpoint.client = EndpointClient.create(
            endpoint.url, self._api_key, self._default_headers, partial(self._send, endpoint)
        )
        return endpoint

    def remove(self, url: str, cancel_in_flight: bool) -> Endpoint:
        endpoint = self.balancer.remove(url)
        died = self._died.pop(endpoint, None)
        if cancel_in_flight and died is not None:
            died.set_result("was removed from the pool")
        return endpoint

    # ------------------------------------------------------------------ requests
    def acquire(self, session_id: str) -> Lease:
        """The session's endpoint, with the request counted in flight; raises Unavailable."""
        if self._session is None:
            raise Unavailable("the model server's endpoint pool is not running (lifespan not started)")
        endpoint = self.balancer.acquire(session_id, time.monotonic())
        died = self._died.get(endpoint)
        if died is None:
            died = self._died[endpoint] = asyncio.get_running_loop().create_future()
        return Lease(endpoint, died)

    async def run(self, lease: Lease, call: Callable[[], Awaitable[T]]) -> T:
        """Run one policy call on the lease's endpoint, bounded as the module docstring says."""
        endpoint = lease.endpoint
        inner = asyncio.ensure_future(call())
        inner.add_done_callback(_consume)
        try:
            done, _ = await asyncio.wait(
                (inner, lease.died), timeout=self.settings.request_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if inner in done:
                try:
                    result = inner.result()
                except (ClientConnectionError, ClientPayloadError) as e:  # lost while reading the answer
                    raise Unavailable(f"policy endpoint {endpoint.url}: connection lost: {e!r}") from e
                self._success(endpoint)
                return result
            if lease.died.done():
                raise Unavailable(f"policy endpoint {endpoint.url} {lease.died.result()}; request cancelled")
            raise Unavailable(
                f"policy call to {endpoint.url} exceeded request_timeout_s={self.settings.request_timeout_s}",
                status=504,
            )
        finally:
            inner.cancel()  # no-op if it finished; else aborts the HTTP request (vLLM frees the slot)
            self.balancer.release(endpoint)

    async def _send(
        self, endpoint: Endpoint, method: str, url: str, json: Any, headers: dict[str, str]
    ) -> ClientResponse:
        """One call's HTTP request: connection errors retried at most connect_attempts times."""
        assert self._session is not None
        data = None if json is None else orjson.dumps(json)
        if data is not None:
            headers = headers | {"Content-Type": "application/json"}
        reason = ""
        for attempt in range(1, self.settings.connect_attempts + 1):
            try:
                return await self._session.request(method, url, data=data, headers=headers)
            except (ClientConnectorError, ConnectionTimeoutError) as e:
                reason = f"cannot connect: {e}"
                self._failure(endpoint, reason)  # unambiguous: counts toward declaring it dead
            except (ServerDisconnectedError, ClientOSError) as e:
                # Also what a stale keep-alive connection gives: retried, not counted.
                reason = f"connection lost: {e!r}"
            if not endpoint.serving:
                break
            if attempt < self.settings.connect_attempts:
                await asyncio.sleep(CONNECT_RETRY_SLEEP_S)
        raise Unavailable(f"policy endpoint {endpoint.url}: {reason}")

    # ------------------------------------------------------------------ health
    async def probe(self, url: str) -> str | None:
        """None if the endpoint answers its health check, else why not. Any answer below 500 counts: a
        server without {base}/models (llama.cpp, a hosted API) answers 404, and is up."""
        session = self._health_session
        if session is None:
            return "the model server's endpoint pool is not running"
        path = self.settings.health_path
        target = str(URL(url).with_path(path)) if path.startswith("/") else f"{url}/{path}"
        headers = self._default_headers | {"Authorization": f"Bearer {self._api_key}"}
        try:
            async with session.get(target, headers=headers) as response:
                await response.read()
                return None if response.status < 500 else f"health check {target} answered {response.status}"
        except TimeoutError:
            return f"health check {target} timed out after {self.settings.health_timeout_s}s"
        except ClientError as e:
            return f"health check {target} failed: {e or type(e).__name__}"

    async def check_all(self) -> None:
        endpoints = self.balancer.endpoints
        errors = await asyncio.gather(*(self.probe(e.url) for e in endpoints))
        for endpoint, error in zip(endpoints, errors):
            if error is None:
                self._success(endpoint)
            else:
                self._failure(endpoint, error)

    async def _health_loop(self) -> None:
        while True:
            try:
                await self.check_all()
                self.balancer.prune(time.monotonic())
            except Exception:  # a bug here must not end health checking for the server's lifetime
                log.exception("policy endpoint health round failed")
            await asyncio.sleep(self.settings.health_interval_s)

    def _failure(self, endpoint: Endpoint, reason: str) -> None:
        if self.balancer.record_failure(endpoint, reason):
            log.warning("policy endpoint %s declared dead: %s", endpoint.url, reason)
            self._signal(endpoint, f"was declared dead after {endpoint.failures} consecutive failures ({reason})")

    def _success(self, endpoint: Endpoint) -> None:
        if self.balancer.record_success(endpoint):
            log.warning("policy endpoint %s is healthy again (new sessions only)", endpoint.url)

    def _signal(self, endpoint: Endpoint, reason: str) -> None:
        died = self._died.pop(endpoint, None)
        if died is not None and not died.done():
            died.set_result(reason)


def _consume(task: asyncio.Future[Any]) -> None:
    """Mark a call's outcome as seen: an abandoned call must not log 'exception never retrieved'."""
    if not task.cancelled():
        task.exception()


class EndpointFile:
    """vllm_model's `endpoint_file`: a shared serving job that moves hosts when it restarts publishes its base URL
    in a file. The pool follows it: a newly published URL joins (once it answers its health check) and the
    endpoints it replaces leave, their sessions' next calls answered 503 (their rollouts run again from INIT, as
    after any endpoint's death). A missing or empty file (the job rotating) changes nothing; an endpoint that
    is gone is declared dead by the health checks."""

    def __init__(self, pool: EndpointPool, path: str, interval_s: float):
        self.pool, self.path, self.interval_s = pool, path, interval_s
        self._mtime: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.check()
        self._task = asyncio.create_task(self._loop(), name="policy-endpoint-file")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def check(self) -> None:
        published = await asyncio.to_thread(self._read)
        if published is None:
            return
        url = normalize_url(published)
        if [e.url for e in self.pool.balancer.endpoints] == [url]:
            return
        log.warning("endpoint file %s publishes %s: the pool follows it", self.path, url)
        if self.pool.balancer.get(url) is None:
            self.pool.add(url, healthy=await self.pool.probe(url) is None)
        for endpoint in self.pool.balancer.endpoints:
            if endpoint.url != url:
                self.pool.remove(endpoint.url, cancel_in_flight=False)

    def _read(self) -> str | None:
        """The URL the file publishes now, if it changed since the last read."""
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime == self._mtime:
                return None
            with open(self.path) as f:
                url = f.read().strip()
        except OSError:
            return None
        self._mtime = mtime
        return url or None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:  # a bad URL in the file must not end the following
                log.exception("reading endpoint file %s failed", self.path)
