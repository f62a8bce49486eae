# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Endpoint choice and health state: pure, synchronous, no I/O (the async side is pool.py).

Rules:
- a new session goes to the healthy endpoint with the fewest in-flight requests (ties: fewest
  sessions, then the order endpoints were added);
- a session stays on its endpoint for its whole rollout: its turns reuse that server's
  prefix cache. A session is bound to one *incarnation* of the endpoint; once that incarnation
  ends (declared dead, or removed) the session fails fast (`Unavailable`) instead of moving:
  the conversation so far was generated there, moving it would silently change servers (and
  drop the cache) mid-rollout, and the agent types the error as policy_error;
- `unhealthy_after` consecutive failures (health checks or connection errors) declare an
  endpoint dead; any success resets the count and revives a dead endpoint for new sessions;
- session bindings are bounded: least recently used first, and idle ones expire.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from prorl_gym.errors import ProrlError
from prorl_gym.wire.failures import NO_ENDPOINT_ERROR


class Unavailable(ProrlError):
    """No endpoint can serve this request; `status` is the HTTP status to answer with, `error_type`
    (if any) what the answer's detail says it was."""

    def __init__(self, reason: str, status: int = 503, error_type: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.error_type = error_type

    @property
    def detail(self) -> str | dict:
        return {"type": self.error_type, "message": self.reason} if self.error_type else self.reason


@dataclass(eq=False)  # identity: a removed and re-added URL is a new endpoint
class Endpoint:
    url: str
    client: Any = field(default=None, repr=False)  # the OpenAI client the async side attaches
    healthy: bool = True  # optimistic: a request's connection error or a health check proves otherwise
    removed: bool = False
    in_flight: int = 0
    sessions: int = 0  # sessions bound to the current incarnation
    failures: int = 0  # consecutive
    incarnation: int = 0  # bumped when declared dead: sessions of older incarnations fail fast
    last_error: str | None = None

    @property
    def serving(self) -> bool:
        return self.healthy and not self.removed

    def view(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "healthy": self.healthy,
            "in_flight": self.in_flight,
            "sessions": self.sessions,
            "failures": self.failures,
            "last_error": self.last_error,
        }


@dataclass
class _Binding:
    endpoint: Endpoint
    incarnation: int
    last_used: float


@dataclass
class Balancer:
    unhealthy_after: int = 3
    max_sessions: int = 100_000
    session_idle_s: float = 3600.0
    _endpoints: dict[str, Endpoint] = field(default_factory=dict)
    _bindings: OrderedDict[str, _Binding] = field(default_factory=OrderedDict)  # least recently used first

    @property
    def endpoints(self) -> list[Endpoint]:
        return list(self._endpoints.values())

    @property
    def num_sessions(self) -> int:
        return len(self._bindings)

    def get(self, url: str) -> Endpoint | None:
        return self._endpoints.get(normalize_url(url))

    def add(self, url: str, healthy: bool = True) -> Endpoint:
        url = normalize_url(url)
        if url in self._endpoints:
            raise ValueError(f"endpoint {url} is already in the pool")
        endpoint = self._endpoints[url] = Endpoint(url=url, healthy=healthy)
        return endpoint

    def remove(self, url: str) -> Endpoint:
        """Take an endpoint out of the pool; its sessions fail fast from their next request."""
        endpoint = self._endpoints.pop(normalize_url(url), None)
        if endpoint is None:
            raise KeyError(url)
        endpoint.removed = True
        endpoint.sessions = 0
        return endpoint

    def route(self, session_id: str, now: float) -> Endpoint:
        """The endpoint for this session's next request (binding a new session to one)."""
        binding = self._bindings.get(session_id)
        if binding is not None:
            endpoint = binding.endpoint
            if endpoint.removed:
                raise Unavailable(f"policy endpoint {endpoint.url} was removed; this session was pinned to it")
            if binding.incarnation != endpoint.incarnation:
                raise Unavailable(
                    f"policy endpoint {endpoint.url} died during this session ({endpoint.last_error}); "
                    "sessions are pinned to one endpoint and not moved"
                )
            binding.last_used = now
            self._bindings.move_to_end(session_id)
            return endpoint
        endpoint = self.pick()
        self._bindings[session_id] = _Binding(endpoint, endpoint.incarnation, now)
        endpoint.sessions += 1
        self.prune(now)
        return endpoint

    def acquire(self, session_id: str, now: float) -> Endpoint:
        """route() and count the request in flight until release()."""
        endpoint = self.route(session_id, now)
        endpoint.in_flight += 1
        return endpoint

    def release(self, endpoint: Endpoint) -> None:
        endpoint.in_flight -= 1

    def pick(self) -> Endpoint:
        candidates = [e for e in self._endpoints.values() if e.serving]
        if not candidates:
            known = ", ".join(f"{e.url} ({e.last_error})" for e in self._endpoints.values()) or "none configured"
            raise Unavailable(f"no healthy policy endpoint: {known}", error_type=NO_ENDPOINT_ERROR)
        return min(candidates, key=lambda e: (e.in_flight, e.sessions))  # min() keeps the first of ties

    def record_failure(self, endpoint: Endpoint, reason: str) -> bool:
        """Count a failure; True if this one declared the endpoint dead."""
        if endpoint.removed:
            return False
        endpoint.failures += 1
        endpoint.last_error = reason
        if endpoint.healthy and endpoint.failures >= self.unhealthy_after:
            endpoint.healthy = False
            endpoint.incarnation += 1
            endpoint.sessions = 0
            return True
        return False

    def record_success(self, endpoint: Endpoint) -> bool:
        """Reset the failure count; True if this revived a dead endpoint (for new sessions only)."""
        endpoint.failures = 0
        if endpoint.healthy or endpoint.removed:
            return False
        endpoint.healthy = True
        return True

    def prune(self, now: float) -> int:
        """Drop bindings beyond max_sessions (LRU) or idle for session_idle_s; returns how many."""
        dropped = 0
        while self._bindings:
            session_id, binding = next(iter(self._bindings.items()))
            if len(self._bindings) <= self.max_sessions and now - binding.last_used <= self.session_idle_s:
                break
            del self._bindings[session_id]
            if binding.incarnation == binding.endpoint.incarnation and not binding.endpoint.removed:
                binding.endpoint.sessions -= 1
            dropped += 1
        return dropped


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
        raise ValueError(f"not an http(s) base URL: {url!r}")
    return url
