# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a command that collects rollouts says on its terminal about the policy: that it is down.

ng_collect_rollouts shows its progress bar and nothing else; a policy with no healthy endpoint
for the agent's grace period (prorl_gym/pipeline/policy_health.py) ends the rollouts waiting for
it typed `policy_down`, and `PolicyWatch` says so as it happens, from the agent's /status, on a
thread of its own (the command's main thread waits on ng_collect_rollouts):

    with PolicyWatch(agent_url, "[eval]") as watch:
        ...collect...
    if watch.down: ...  # what the agent said when it declared the policy down (the command fails)
"""

from __future__ import annotations

import sys
import threading
import urllib.request
from typing import TextIO

from prorl_gym.wire.jobs import PolicyHealthView, Status


class PolicyWatch:
    def __init__(self, agent_url: str | None, prefix: str, interval_s: float = 2.0, out: TextIO | None = None):
        self.agent_url, self.prefix, self.interval_s = agent_url, prefix, interval_s
        self.out = out or sys.stderr
        self.down: PolicyHealthView | None = None  # the first declaration seen
        self._said_down = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="policy-watch", daemon=True)

    def __enter__(self) -> PolicyWatch:
        if self.agent_url:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.look()  # the state as the collection ended (a declaration just before its last records)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.look()

    def look(self) -> None:
        """Ask the agent once; say a declaration down (or up again) the first time it is seen."""
        health = self.health()
        if health is None:
            return
        if health.down and not self._said_down:
            self.down = self.down or health
            self._said_down = True
            self._say(f"POLICY DOWN: {health.message}")
        elif not health.down and self._said_down:
            self._said_down = False
            self._say("the policy is up again: an endpoint is healthy (rollouts that ended policy_down stay failed)")

    def health(self) -> PolicyHealthView | None:
        if not self.agent_url:
            return None
        try:
            with urllib.request.urlopen(f"{self.agent_url}/status", timeout=10) as response:
                return Status.model_validate_json(response.read()).policy_health
        except (OSError, ValueError):  # the agent restarting, or gone with the stack: nothing to say
            return None

    def _say(self, line: str) -> None:
        self.out.write(f"\n{self.prefix} {line}\n")
        self.out.flush()
