# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Host-side helpers for the containment tests: limits, /proc inspection, sandbox attribution.

Processes are attributed to a sandbox by its pid namespace (every process of a sandbox
lives in the pid namespace of its pid 1), never by the shared sandbox uid: other
sandboxes of unrelated test runs may be alive on the same host at the same time. A pid
namespace's inode number is reused as soon as it is freed, so it only identifies the
sandbox while its pid 1 (same pid, same start time) is alive; once pid 1 is gone the
kernel has killed every process of that namespace.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

from prorl_gym.sandbox import Sandbox, SandboxSpec
from prorl_gym.sandbox.spec import ResourceLimits

MiB = 1 << 20
# Small limits keep the exhaustion tests fast and cheap. memory_bytes is an address-space
# limit per process: the IPython kernel alone reserves ~520-720 MiB of address space at
# start-up (11 threads, glibc arenas), so 512 MiB makes kernel start-up fail intermittently.
LIMITS = ResourceLimits(
    processes=64,
    memory_bytes=1024 * MiB,
    file_size_bytes=16 * MiB,
    open_files=256,
    workspace_bytes=64 * MiB,
    tmp_bytes=64 * MiB,
    cpu_time_s=20,
)
SPEC = SandboxSpec()  # for defaults (host_uid)
SANDBOX_UID = SPEC.backend.host_uid if os.geteuid() == 0 else os.getuid()
# The run dir (kernel sockets) is the only host directory bound writable: an agent finds it in its mount table.
FIND_RUN_DIR = "R=$(awk '$2 ~ /^\\/tmp\\/.*\\/run$/ {print $2}' /proc/self/mounts)"

# Every sandbox the security tests started through `make` (all modules), for the leak checks.
_CREATED: list[dict] = []


# --------------------------------------------------------------------------- host-side helpers


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _mounts_mention(pid: int, text: str) -> bool:
    """Every process of a sandbox has its socket dir (under the sandbox root) in its mount table."""
    try:
        return text in Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return False


def _procs_in_ns(ns: str) -> list[int]:
    return [pid for pid in _pids() if _pid_ns(pid) == ns]


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    state = _status(pid).get("State", "")
    return bool(state) and not state.startswith(("Z", "X"))


def _runs_code(pid: int) -> bool:
    """Alive and not already exiting (a pid 1 waiting in zap_pid_ns_processes for its
    namespace's zombies to be reaped runs no code any more)."""
    try:
        exiting = Path(f"/proc/{pid}/wchan").read_text() == "zap_pid_ns_processes"
    except OSError:
        exiting = False
    return _alive(pid) and not exiting


def _disk_usage(path: Path) -> int:
    """Bytes allocated on the host under path (what a sandbox could have put on the host disk)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _sandbox_procs(entry: dict) -> list[int]:
    """Host pids of the processes inside a sandbox (its pid namespace), [] once its pid 1 is gone."""
    init = entry["init_pid"]
    if not _alive(init) or _start_time(init) != entry["init_start"]:
        return []
    return _procs_in_ns(entry["ns"])


def _leftovers(root: str) -> dict[int, str]:
    """Processes of any sandbox created here that can still run code: inside one (its pid
    namespace, or a mount table with the module's root in it), naming the module's root dir
    (bwrap), or our children joining one (nsenter).
    (A pid 1 already exiting, waiting for its zombies to be reaped, is the subject of
    test_lifecycle.py::test_close_leaves_nothing_for_the_hosts_init_to_reap.)"""
    found = {pid: _cmdline(pid)[:200] for entry in _CREATED for pid in _sandbox_procs(entry) if _runs_code(pid)}
    joins = tuple(f"nsenter -t {entry['init_pid']} " for entry in _CREATED)
    for pid in _pids():
        if pid == os.getpid() or not _runs_code(pid):
            continue
        cmd = _cmdline(pid)
        ours = _status(pid).get("PPid") == str(os.getpid())
        if root in cmd or _mounts_mention(pid, root) or (ours and any(join in cmd for join in joins)):
            found[pid] = cmd[:200]
    return found


def _entry(sb: Sandbox) -> dict:
    return next(entry for entry in _CREATED if entry["id"] == sb.id)


def _ns(sb: Sandbox) -> str:
    return _entry(sb)["ns"]


def _procs(sb: Sandbox) -> list[int]:
    return _sandbox_procs(_entry(sb))


async def _assert_usable(sb: Sandbox) -> None:
    result = await sb.bash("echo usable-$((6 * 7))")
    # bash reports background jobs that ended ("[1]+  Done ...") after a command, as a terminal does.
    assert result.output.splitlines()[0] == "usable-42", result
    assert result.exit_code == 0 and not result.timed_out and not result.shell_restarted
