# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""CPU time of a whole stack, read from /proc: every process descending from the stack's own
(ng_run, the scripted policy), by kind, so that a figure does not depend on how busy the
machine is.

A process counts its own time (utime + stime) and that of its children it has reaped (cutime +
cstime), so summing live processes counts every process once: a sandbox shell that ended is in
the resources server's children time, a kernel in its zygote's (a subreaper). The difference of
two snapshots is the CPU the stack spent in between.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.supervise import read_child_pid

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# By working directory of the server processes (ng_run starts each server in its own folder).
SERVER_KINDS = (
    ("resources_servers/", "resources_server"),
    ("responses_api_agents/", "agent"),
    ("environment_servers/", "environment_server"),
)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    kind: str
    self_s: float  # its own CPU
    reaped_s: float  # its reaped children's


def _stat(pid: str) -> tuple[int, float, float] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    ppid, utime, stime, cutime, cstime = int(fields[1]), *map(int, fields[11:15])
    return ppid, (utime + stime) * TICK_S, (cutime + cstime) * TICK_S


def _kind(pid: int, parent_kind: str | None) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return parent_kind or "other"
    cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
    if "server_zygote" in cmdline and cwd == "/":
        return "server_zygote"  # the pre-imported interpreter the servers are forked from (its servers chdir)
    if "zygote_main" in cmdline or parent_kind == "kernel":
        return "kernel"  # the zygote, the kernels it forked (and their intermediates)
    if "scripted_policy" in cmdline or "llamacpp_policy" in cmdline:
        return "policy"  # the policy endpoint: the scripted stand-in, or a real model on the CPU
    if (
        "ray::" in cmdline
        or "/site-packages/ray/" in cmdline
        or cmdline.startswith("ray-")
        or "prorl_gym.ray_head" in cmdline
    ):
        return "ray"  # the stack's Ray cluster (prorl_gym/ray_head.py, or the one ng_run starts): its daemons, workers
    if "ng_run" in cmdline:
        return "ng_run"
    if cmdline.startswith(("bwrap", "setpriv", "nsenter", "bash", "/bin/sh")) or parent_kind == "sandbox":
        return "sandbox"
    if "multiprocessing" in cmdline or "verify" in cmdline:
        return "verifier"
    if "responses_api_models/" in cwd or "vllm_model" in cwd:
        return "model_server"
    for fragment, kind in SERVER_KINDS:
        if fragment in cwd:
            return kind
    return parent_kind or "other"


def snapshot(roots: list[int]) -> dict[int, Proc]:
    """Every live process descending from `roots` (roots included); a supervisor's server counts as its
    child although the server zygote forked it (prorl_gym/supervise.py), and the zygote itself (not its
    other servers, which may be another stack's) as the first such supervisor's."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p)) is not None}
    children = defaultdict(list)
    for pid, (ppid, _, _) in stats.items():
        children[ppid].append(pid)
    leaves: set[int] = set()  # counted, their children not
    for pid in list(stats):
        server = read_child_pid(pid)
        if server in stats and server not in children[pid]:
            children[pid].append(server)
            zygote = stats[server][0]
            if zygote != pid and zygote in stats and zygote not in leaves:
                leaves.add(zygote)
                children[pid].append(zygote)
    found: dict[int, Proc] = {}
    stack = [(pid, None) for pid in roots if pid in stats]
    while stack:
        pid, parent_kind = stack.pop()
        ppid, self_s, reaped_s = stats[pid]
        kind = _kind(pid, parent_kind)
        found[pid] = Proc(pid, ppid, kind, self_s, reaped_s)
        stack += [(child, kind) for child in children[pid]] if pid not in leaves else []
    return found


def cpu_spent(before: dict[int, Proc], after: dict[int, Proc]) -> dict[str, float]:
    """CPU seconds spent between two snapshots, by kind; "total" is exact, the split is by the
    kind of the process that holds the time (an ended process's time moves to its reaper's)."""
    spent: Counter[str] = Counter()
    for procs, sign in ((after, 1), (before, -1)):
        for proc in procs.values():
            spent[proc.kind] += sign * proc.self_s
            # what a resources server reaps is its sandboxes' processes (their shells, bubblewrap)
            spent["sandbox" if proc.kind == "resources_server" else proc.kind] += sign * proc.reaped_s
    total = sum(spent.values())
    return {kind: round(value, 3) for kind, value in sorted(spent.items())} | {"total": round(total, 3)}


def harness_ms_per_rollout(spent: dict[str, float], rollouts: int) -> float:
    """CPU-ms per rollout of every process but the scripted policy (it stands in for the GPU's server)."""
    return round((spent["total"] - spent.get("policy", 0.0)) * 1000 / rollouts, 1)


def ms_per_rollout_by_kind(spent: dict[str, float], rollouts: int) -> dict[str, float]:
    """The split of cpu_spent, in CPU-ms per rollout (the scripted policy included, for reference)."""
    return {kind: round(value * 1000 / rollouts, 1) for kind, value in spent.items() if kind != "total"}
