# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`isolation: none`: a private directory and process sessions only, no namespaces. Processes run as
the server's user and see the host's files: for trusted code only (the backend says so loudly).
Every process it starts carries a tag in its environment, so close() finds and kills what escaped
its process group (setsid, double forks) by scanning /proc."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from prorl_gym.sandbox.backends.base import PlacementBase
from prorl_gym.sandbox.backends.inside import SANDBOX_ENV
from prorl_gym.sandbox.backends.local.processes import TAG_VAR, kill_tagged
from prorl_gym.sandbox.spec import SandboxSpec


class UnisolatedPlacement(PlacementBase):
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec):
        super().__init__(sandbox_id, private_dir, spec)  # the server's own user: nothing to take back
        self.workspace = str(private_dir / "workspace")
        self.control_dir = private_dir / "run"
        self.spawn_fds: dict[int, int] = {}
        self.init_pid: int | None = None  # no namespaces to join
        self.own_pid_namespace = False  # it sees the host's processes
        self.rlimits: dict[str, int | list[int]] = {}  # no isolation, no limits
        self.pids: list[int] = []  # processes are found by their tag instead
        self.fork_dirs: tuple[str, ...] = ()  # cannot fork: no namespaces to mount a template in

    async def start(self) -> None:
        for sub in ("workspace", "tmp", "run"):
            (self.private_dir / sub).mkdir(parents=True, exist_ok=True)

    def wrap(self, argv: list[str]) -> list[str]:
        return list(argv)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        return list(argv), ""

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": f"{Path(self.python).parent}:{os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin')}",
            "HOME": self.workspace,
            "TMPDIR": str(self.private_dir / "tmp"),
            "IPYTHONDIR": str(self.private_dir / "tmp" / ".ipython"),  # not in the agent's workspace (HOME)
            **SANDBOX_ENV,
        }
        env.update(self._spec.env)
        env[TAG_VAR] = self.sandbox_id
        return env

    async def close(self) -> bool:
        if self._closed:
            return True
        self._closed = True
        await asyncio.to_thread(kill_tagged, self.sandbox_id)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)
        return True
