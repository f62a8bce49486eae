# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Process control for the runner: hardening, per-test limits, and killing what tests leave.

The runner is a child subreaper, so whatever a solution forks (also with setsid or a
double fork) stays its descendant and is found and killed after each test.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


class RunnerError(BaseException):
    """The runner itself cannot go on: an eval error, never a failed test."""


def harden() -> None:
    """Not dumpable: same-uid processes (the solution) cannot read our memory, fds or
    environment through /proc, nor ptrace us. Subreaper: orphans reparent to us."""
    libc = ctypes.CDLL(None, use_errno=True)
    for option in (PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER):
        value = 0 if option == PR_SET_DUMPABLE else 1
        if libc.prctl(option, value, 0, 0, 0) != 0:
            raise RunnerError(f"prctl({option}) failed: errno {ctypes.get_errno()}")


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) of every process we can see (our pid namespace)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def ancestors(table: dict[int, tuple[int, str]]) -> set[int]:
    found, pid = set(), os.getpid()
    while pid in table and pid not in found:
        found.add(pid)
        pid = table[pid][0]
    return found


def kill_strangers() -> None:
    """Before any solution code runs: end every process that is not ours, our ancestor or
    the sandbox's init. In a fresh eval sandbox that is the file shell that wrote the
    tests; its freed memory must not outlive it where the solution could read it.
    Only in a sandbox with its own pid namespace (the runner is told)."""
    table = _table()
    keep = ancestors(table) | {1}
    for pid, (ppid, _) in table.items():
        if pid not in keep and ppid != 1:
            _kill(pid)


def descendants(table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    table = table if table is not None else _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def kill_descendants(keep: int | None = None) -> bool:
    """SIGKILL every live descendant but `keep` (the function-test worker between tests),
    reaping orphans, until none is left (a fork bomb is capped by RLIMIT_NPROC). Best
    effort: whatever survives can only hurt the solution's own later tests, and closing
    the sandbox ends it."""
    for _ in range(200):
        reap()
        table = _table()
        live = [pid for pid in descendants(table) if pid != keep and table[pid][1] != "Z"]
        if not live:
            return True
        for pid in live:
            _kill(pid)
        time.sleep(0.001)
    return False


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def child_limits(memory_bytes: int, cpu_s: float):
    """preexec_fn for a solution process: address space and CPU time, as hard limits (it
    cannot raise them). CPU: SIGXCPU at the soft limit, SIGKILL one second later."""
    cpu = max(1, int(cpu_s + 0.999))

    def apply() -> None:
        _lower(resource.RLIMIT_AS, memory_bytes, memory_bytes)
        _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
        _lower(resource.RLIMIT_CORE, 0, 0)

    return apply


def _lower(which: int, soft: int, hard: int) -> None:
    current = resource.getrlimit(which)[1]
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
    resource.setrlimit(which, (min(soft, hard), hard))


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
