# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Retries wait for recovery, not for a schedule.

A rollout that failed through the infrastructure's fault runs again once the part it needs is
healthy again: the resources server answers its /status (and, where sandboxes run on hosts, one
host is healthy and not draining), or the policy model server lists an endpoint that is healthy
and whose last request or health check succeeded. It waits
at least `retry.backoff_s`, at most `retry.recovery_timeout_s`; the wait goes into the record
(`timings.retry_wait_s`) and /metrics. A server whose supervisor gave up answers 503
`server_gave_up`: the waiting rollouts end at once, typed `server_down`, and are not run again; so
do those waiting for a policy the agent has declared down (prorl_gym/pipeline/policy_health.py),
typed `policy_down`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from prorl_gym.pipeline.peers import PeerUnreachable, error_type, exchange
from prorl_gym.supervise import GAVE_UP_ERROR
from prorl_gym.wire.failures import Failure, FailureType

POLL_S = 0.5  # how often a part's health is asked while waiting
CHECK_TIMEOUT_S = 5.0  # one health check


class Part(StrEnum):
    RESOURCES = "resources_server"
    POLICY = "policy"


def part_of(failure: Failure) -> Part:
    """What an infrastructure failure needs back before the rollout can run again."""
    return Part.POLICY if failure.type == FailureType.POLICY_ERROR else Part.RESOURCES


class PartGone(Exception):
    """The part's supervisor gave up on it: it is not coming back."""


class PolicyDown(PartGone):
    """The agent has declared the policy down (no endpoint healthy for its grace period): not waited on."""


class Recovery:
    def __init__(self, peers: Any):
        self.peers = (
            peers  # .client (.get(server_name, url_path) -> .status/.read()), .resources_server, .model_server
        )
        self.policy_down: Callable[[], str | None] = lambda: None  # why the policy is declared down, if it is

    async def wait(self, part: Part, at_least_s: float, at_most_s: float) -> tuple[float, bool]:
        """Wait until `part` is healthy (after `at_least_s`, before `at_most_s`): (seconds waited, healthy).
        Raises PartGone when its server says it will not come back, PolicyDown when the policy is declared down."""
        started = time.monotonic()
        self._check_policy(part)
        await asyncio.sleep(at_least_s)
        while True:
            self._check_policy(part)
            if await self.healthy(part):
                return time.monotonic() - started, True
            if time.monotonic() - started + POLL_S > at_most_s:
                return time.monotonic() - started, False
            await asyncio.sleep(POLL_S)

    def _check_policy(self, part: Part) -> None:
        if part == Part.POLICY and (said := self.policy_down()):
            raise PolicyDown(said)

    async def healthy(self, part: Part) -> bool:
        path = "/status" if part == Part.RESOURCES else "/endpoints"
        server = self.peers.resources_server if part == Part.RESOURCES else self.peers.model_server
        try:
            answer = await exchange(self.peers.client, "get", server, path, timeout=CHECK_TIMEOUT_S)
        except (TimeoutError, PeerUnreachable, OSError):
            return False  # not answering (yet): a supervised server is coming back
        if answer.status == 503 and error_type(answer.payload) == GAVE_UP_ERROR:
            raise PartGone(f"the {part.value} is down for good: {answer.payload[:300].decode(errors='replace')}")
        if answer.status == 404:  # not one of ours (no /status, no /endpoints): answering is all we can tell
            return True
        if answer.status != 200:
            return False
        return _ready(part, json.loads(answer.payload))


def _ready(part: Part, status: dict) -> bool:
    if part == Part.POLICY:
        # Healthy *and* no failure since its last success: an endpoint killed a moment ago is still
        # listed healthy until enough checks fail, and a retry sent then only burns an attempt.
        return any(e.get("healthy") and not e.get("failures") for e in status.get("endpoints", []))
    hosts = status.get("hosts") or []
    return not hosts or any(h.get("healthy") and not h.get("draining") for h in hosts)
