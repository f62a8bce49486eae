# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A policy that stays down is told, not waited on.

The agent asks its model server which policy endpoints are healthy (`GET /endpoints` of
balanced_vllm_model) every `poll_s`; an endpoint is healthy when its last request or health check
succeeded, and a model server that does not answer has none. When no endpoint has been healthy for
`grace_s`, the policy is declared down, once:

- every batch's job stream gets a `policy_down` line (since when, for how long, each endpoint with
  its last error), and `policy_up` once an endpoint is healthy again (`told()` adds them);
- /status (`policy_health`), /metrics (`prorl_policy_down`, `prorl_policy_unhealthy_seconds`) and
  the dashboard say so;
- the rollouts waiting for the policy end at once, typed `policy_down` (new ones too, before INIT:
  no sandbox is made for a rollout that cannot run), instead of each waiting up to
  `retry.recovery_timeout_s`; /run callers (ng_collect_rollouts, NeMo RL) get that record.

`grace_s: null` never declares it down: rollouts then wait up to retry.recovery_timeout_s, as
before. A model server that is not ours (no /endpoints: NeMo Gym's vllm_model) cannot say which
endpoints are healthy; the policy is then taken to be up. Nor is anything known before the model
server has answered once (ng_run starts the servers together: the agent may be up first).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic import Field

from prorl_gym.config import StrictConfig
from prorl_gym.wire.jobs import PolicyHealthView

log = logging.getLogger(__name__)
# (HTTP status, body) of the model server's GET /endpoints; raises when it does not answer
EndpointsProbe = Callable[[], Awaitable[tuple[int, bytes]]]


class PolicyHealthConfig(StrictConfig):
    """The agent's `policy_health:` block."""

    # no endpoint healthy this long: the policy is declared down (null: never; rollouts wait for it up to
    # retry.recovery_timeout_s each)
    grace_s: float | None = Field(60.0, gt=0)
    poll_s: float = Field(2.0, gt=0)  # how often the model server is asked
    probe_timeout_s: float = Field(5.0, gt=0)


class PolicyHealth:
    def __init__(self, config: PolicyHealthConfig, probe: EndpointsProbe):
        self.config, self._probe = config, probe
        self.healthy = True
        self.down = False
        self.downs = 0  # declarations since the agent started
        self.endpoints: list[dict] = []
        self.reason = ""  # why none is healthy, as the model server says
        self._unhealthy_since: float | None = None  # monotonic
        self._unhealthy_since_wall: float | None = None
        self.version = 0  # bumped when declared down or up again (what streams tell)
        self.changed = asyncio.Event()  # set and replaced on each change of `version`
        self._task: asyncio.Task | None = None
        self._answered = False  # the model server has answered once

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._poll_forever(), name="policy-health")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _poll_forever(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:  # a bug here must not end the watch for the agent's lifetime
                log.exception("policy health poll failed")
            await asyncio.sleep(self.config.poll_s)

    # ------------------------------------------------------------------ state

    async def poll(self) -> None:
        """Ask the model server once, and update the state (declaring down or up as due)."""
        try:
            async with asyncio.timeout(self.config.probe_timeout_s):
                status, payload = await self._probe()
        except Exception as exc:  # noqa: BLE001 - whatever kept it from answering: no endpoint can serve
            if self._answered:  # not before it ever has: it may still be starting
                self.observe(False, [], f"the model server does not answer: {exc or type(exc).__name__}")
            return
        self._answered = True
        if status == 404:  # not ours: it cannot say
            self.observe(True, [], "")
            return
        try:
            endpoints = json.loads(payload).get("endpoints") if status == 200 else None
        except (ValueError, AttributeError):
            endpoints = None
        if not isinstance(endpoints, list):
            self.observe(False, [], f"the model server answered {status}: {payload[:300].decode(errors='replace')}")
            return
        healthy = any(e.get("healthy") and not e.get("failures") for e in endpoints)
        reason = "; ".join(f"{e.get('url')}: {e.get('last_error') or 'unhealthy'}" for e in endpoints)
        self.observe(healthy, endpoints, reason or "no endpoint is configured")

    def observe(self, healthy: bool, endpoints: list[dict], reason: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.endpoints = [{k: e.get(k) for k in ("url", "healthy", "last_error")} for e in endpoints]
        self.healthy = healthy
        if healthy:
            self.reason, self._unhealthy_since, self._unhealthy_since_wall = "", None, None
            if self.down:
                log.warning("the policy is up again: an endpoint is healthy")
                self._set_down(False)
            return
        self.reason = reason
        if self._unhealthy_since is None:
            self._unhealthy_since, self._unhealthy_since_wall = now, time.time()
        grace = self.config.grace_s
        if not self.down and grace is not None and now - self._unhealthy_since >= grace:
            log.warning("the policy is down: %s", self.message())
            self.downs += 1
            self._set_down(True)

    def _set_down(self, down: bool) -> None:
        self.down = down
        self.version += 1
        self.changed.set()
        self.changed = asyncio.Event()

    @property
    def unhealthy_s(self) -> float:
        return 0.0 if self._unhealthy_since is None else time.monotonic() - self._unhealthy_since

    def message(self) -> str:
        if self.healthy:
            return "a policy endpoint is healthy"
        said = f"no policy endpoint has been healthy for {self.unhealthy_s:.0f}s ({self.reason})"
        if self.down:
            grace = f"{self.config.grace_s:g}s"
            return (
                f"{said}; rollouts waiting for it end typed policy_down (the agent's policy_health.grace_s: {grace})"
            )
        return said

    def down_message(self) -> str | None:
        """Why a rollout must not wait for the policy now, or None."""
        return self.message() if self.down else None

    def view(self, event: str | None = None) -> PolicyHealthView:
        return PolicyHealthView(
            event=event,
            down=self.down,
            healthy=self.healthy,
            unhealthy_s=round(self.unhealthy_s, 3),
            since=self._unhealthy_since_wall,
            grace_s=self.config.grace_s,
            endpoints=self.endpoints,
            message=self.message(),
        )

    def event_line(self) -> str:
        """The stream line of the current state: `policy_down` or `policy_up`."""
        return self.view("policy_down" if self.down else "policy_up").model_dump_json()

    # ------------------------------------------------------------------ streams

    async def told(self, lines: AsyncIterator[str | None]) -> AsyncIterator[str | None]:
        """A batch's stream lines with this state's events among them: `policy_down` first if the policy
        is down when the stream starts, then each declaration down or up as it happens."""
        seen = self.version
        if self.down:
            yield self.event_line()
        iterator, pending = aiter(lines), None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(iterator, _END))
                change = asyncio.ensure_future(self.changed.wait())
                try:
                    await asyncio.wait((pending, change), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    change.cancel()
                if self.version != seen:
                    seen = self.version
                    yield self.event_line()
                if pending.done():
                    line, pending = pending.result(), None
                    if line is _END:
                        return
                    yield line
        finally:
            if pending is not None:
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)
            await iterator.aclose()


_END = object()
