# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How long the whole stack takes to be ready, and what it holds once ready.

    python -m benchmarks.stack_start [--repeats 1]

`ng_run` with every environment (configs/all.yaml: code, math, STEM, SWE, their agents), the
policy model server and the Ray cluster NeMo Gym starts, plus the scripted policy: seconds from
launch to NeMo Gym's "servers ready!" (`ready_s`), then every process descending from the
stack (benchmarks/cpu.py) with its memory: `rss_mib` sums resident sets (shared pages counted
in each process, as `ps` would add them up), `pss_mib` shares them out (what the stack really
costs the machine), both split by process kind. Baseline in the same run: NeMo Gym's own
math_with_code + simple_agent behind the same model server (benchmarks/peer_nemo_gym.py's
stack), one environment without sandboxes; `ready_vs_peer` and `pss_vs_peer` are the ratios.
Targets (reported, not asserted): ready in <= 15 s, <= 1.5 GiB.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks import peer_nemo_gym
from benchmarks.common import emit, percentile, sandbox_root
from benchmarks.cpu import snapshot
from benchmarks.rollouts import MATH_EXAMPLE
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack, run_cli

TARGETS = {"ready_s": 15.0, "pss_mib": 1536}
LOGS = REPO_ROOT / "results" / "bench" / "logs" / "stack_start"


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; (0, 0) if it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()[1:] if line.endswith("kB")}
    return fields.get("Rss", 0), fields.get("Pss", 0)


def footprint(stack: Stack) -> dict:
    procs = snapshot(stack.pids)
    rss, pss, count = Counter(), Counter(), Counter()
    for proc in procs.values():
        r, p = _memory_kib(proc.pid)
        rss[proc.kind] += r
        pss[proc.kind] += p
        count[proc.kind] += 1
    mib = lambda kib: round(kib / 1024, 1)  # noqa: E731
    return {
        "processes": sum(count.values()),
        "rss_mib": mib(sum(rss.values())),
        "pss_mib": mib(sum(pss.values())),
        "processes_by_kind": dict(sorted(count.items())),
        "pss_mib_by_kind": {kind: mib(kib) for kind, kib in sorted(pss.items())},
    }


def measure(stack: Stack) -> dict:
    started = time.perf_counter()
    with stack:
        ready_s = time.perf_counter() - started
        time.sleep(2.0)  # what the servers start in the background once ready (pools, zygotes) is counted
        return {"ready_s": round(ready_s, 2)} | footprint(stack)


def ours(root: str) -> Stack:
    overrides = [
        f"+{server}.resources_servers.{server}.sandbox.root_dir={root}" for server in ("code", "math", "stem", "swe")
    ]
    return Stack(
        ["configs/all.yaml"],
        overrides=overrides,
        policy_data=[str(MATH_EXAMPLE)],
        log_dir=LOGS / "ours",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="starts of each stack (the median is reported)")
    args = parser.parse_args()
    runs = {"ours": [], "peer": []}
    for _ in range(args.repeats):
        with sandbox_root() as root:
            runs["ours"].append(measure(ours(root)))
        with tempfile.TemporaryDirectory(prefix="prorl-peer-") as scratch:
            runs["peer"].append(measure(peer_stack(Path(scratch))))
    for name, results in runs.items():
        print(name, results, flush=True)
    ours_run, peer_run = _median(runs["ours"]), _median(runs["peer"])
    results = ours_run | {
        "ready_s_runs": [r["ready_s"] for r in runs["ours"]],
        "peer": peer_run,
        "ready_vs_peer": round(ours_run["ready_s"] / peer_run["ready_s"], 2),
        "pss_vs_peer": round(ours_run["pss_mib"] / peer_run["pss_mib"], 2),
        "targets": TARGETS,
        "meets_targets": {key: ours_run[key] <= target for key, target in TARGETS.items()},
    }
    emit("stack_start", results)


def _median(results: list[dict]) -> dict:
    """The run whose ready_s is the median one."""
    ordered = sorted(results, key=lambda r: r["ready_s"])
    return ordered[len(ordered) // 2] | {"ready_s": round(percentile((r["ready_s"] for r in results), 50), 2)}


def peer_stack(scratch: Path) -> Stack:
    """NeMo Gym's own one-environment stack, as benchmarks/peer_nemo_gym.py runs it."""
    root = peer_nemo_gym.peer_root(scratch)
    return Stack(
        [
            "configs/base.yaml",
            f"{peer_nemo_gym.PEER_SERVER}/configs/math_with_code.yaml",
            f"{peer_nemo_gym.MODEL}/configs/balanced_vllm_model.yaml",
        ],
        policy_data=[str(MATH_EXAMPLE)],
        policy_args=["--tool-alias", "python=execute_python"],
        log_dir=LOGS / "peer",
        root=root,
    )


if __name__ == "__main__":
    run_cli(main)
