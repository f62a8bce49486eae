# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The steady soak: `--concurrency` math rollouts in flight for `--minutes`, policy latency per turn, no faults:
the servers' RSS growth and open fds over the run (rss_growth_pct, fd_growth: measured idle after
a minute of warm-up and again at the end, so start-up caches and in-flight work do not count)
and rollouts per minute over time.

    python -m benchmarks.soak_steady [--concurrency 256] [--minutes 10] [--busy N]     (make soak, after soak.py)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import emit, raise_fd_limit
from benchmarks.soak_stack import LOG_DIR, busy_node, read_proc, save_dashboards, soak_stack
from prorl_gym.client import ProRLClient
from prorl_gym.environments import discover
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import run_cli
from prorl_gym.testing import stack_servers

IDLE_S = 40  # before measuring idle servers: longer than any keep-alive (aiohttp 15 s, uvicorn 30 s)


def server_processes(session: int) -> list[int]:
    return list(stack_servers(session).values())


def footprint(pids: list[int]) -> tuple[int, int]:
    """(RSS bytes, open fds) summed over pids."""
    rss = fds = 0
    for pid in pids:
        status = read_proc(f"/proc/{pid}/status")
        rss += next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return rss, fds


async def run_steady(url: str, rows: list[dict], concurrency: int, seconds: float) -> dict:
    """`concurrency` rollouts in flight for `seconds`, each worker submitting its next as one ends."""
    stop_at = time.monotonic() + seconds
    done: list[float] = []
    failures: Counter[str] = Counter()

    async def worker(client: ProRLClient, k: int) -> None:
        while time.monotonic() < stop_at:
            batch = await client.submit([rows[k % len(rows)]])
            async for record in client.stream(batch.batch_id):
                done.append(time.monotonic())
                if record.failure:
                    failures[record.failure.type.value] += 1

    async with ProRLClient(url, timeout_s=600) as client:
        await asyncio.gather(*(worker(client, k) for k in range(concurrency)))
    start = min(done) if done else 0
    per_minute = Counter(int((t - start) // 60) for t in done)
    return {
        "rollouts": len(done),
        "failures": dict(failures),
        "per_minute": [per_minute[m] for m in sorted(per_minute)],
    }


def soak_steady(concurrency: int, minutes: float, log_dir: Path) -> dict:
    """A minute of warm-up, then the run; the servers' RSS and fds measured idle after each (all
    rollouts ended, their sandboxes closed), so what is compared is what the run left behind."""
    math = next(e for e in discover() if e.name == "math")
    with soak_stack([math], log_dir, latency_ms=500, run_workers=concurrency) as soak:
        url, rows = soak.agents["math"], read_jsonl(math.example)

        def idle_footprint() -> tuple[int, int, dict[str, int]]:
            time.sleep(IDLE_S)  # the last sandboxes close, idle keep-alive connections expire
            pids = server_processes(soak.stack.session)
            rss, fds = footprint(pids)
            return rss, fds, {Path(os.readlink(f"/proc/{p}/cwd")).name: footprint([p])[1] for p in pids}

        warmup = asyncio.run(run_steady(url, rows, concurrency, 60))
        before = idle_footprint()
        run = asyncio.run(run_steady(url, rows, concurrency, max(0.0, minutes - 1) * 60))
        after = idle_footprint()
        dashboards = save_dashboards(soak, log_dir)
    return {
        "dashboards": dashboards,
        "concurrency": concurrency,
        "minutes": minutes,
        "rollouts": warmup["rollouts"] + run["rollouts"],
        "failures_by_type": dict(Counter(warmup["failures"]) + Counter(run["failures"])),
        "rollouts_per_minute": warmup["per_minute"] + run["per_minute"],
        "rss_mib_after_warmup": round(before[0] / 2**20, 1),
        "rss_mib_end": round(after[0] / 2**20, 1),
        "rss_growth_pct": round((after[0] - before[0]) / before[0] * 100, 2) if before[0] else None,
        "fds_after_warmup": before[1],
        "fds_end": after[1],
        "fd_growth": after[1] - before[1],
        "fds_by_server": {name: [before[2].get(name), fds] for name, fds in after[2].items()},
        "targets": {"rss_growth_pct": 10, "fd_growth": 16},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--busy", type=int, default=0, help="processes of other work spinning on the CPUs meanwhile")
    args = parser.parse_args()
    raise_fd_limit()
    if LOG_DIR.exists():
        shutil.rmtree(LOG_DIR)
    with busy_node(args.busy):
        emit("soak_steady", soak_steady(args.concurrency, args.minutes, LOG_DIR) | {"busy_processes": args.busy})


if __name__ == "__main__":
    run_cli(main)
