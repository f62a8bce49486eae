# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's cost on the server: CPU per request with 10,000 retained records.

A server process holds one job service (JobManager, its SQLite journal on disk) with one finished
batch of 10,000 rollouts (1,000 tasks x 10 samples; four turns each, with token ids and tool
outputs; every 10th a RUN timeout), and the dashboard's routes under uvicorn, as the agent mounts
them. This process asks each route in turn and reads the server's CPU time (utime + stime, all its
threads) from /proc before and after: the figure is the server's alone, not the client's.

    live (uncached)   GET /dashboard/api/live with cache_s 0: the job status's percentiles and the
                      batch list, computed per request (a viewer polls once a second; the default
                      cache_s 1 makes that once a second whatever the number of viewers)
    search            GET /dashboard/api/rollouts?batch=... (a page of 50, newest first)
    search_filtered   ... failure=timeout, page 10: a scan of the 10,000 summaries
    open              GET /dashboard/api/rollout?job_id=...: one record read from the journal, its turns
    first_search      the first search after the start: the index filled from the journal (once)

    python -m benchmarks.dashboard [--records 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.common import emit, ms
from prorl_gym.stack import run_cli

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SAMPLES = 10


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# ---------------------------------------------------------------------------- the server process


def record(k: int) -> dict:
    """A rollout like the math environment's: four turns (tool call, output), token ids, timings."""
    output = []
    for turn in range(4):
        ids = list(range(1000 + turn, 1100 + turn))
        output.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x" * 200}]}
        )
        output.append(
            {
                "type": "function_call",
                "name": "python",
                "arguments": f'{{"code": "print({turn})"}}',
                "call_id": f"c{turn}",
                "prompt_token_ids": ids * 3,
                "generation_token_ids": ids,
                "generation_log_probs": [-0.5] * len(ids),
            }
        )
        output.append({"type": "function_call_output", "call_id": f"c{turn}", "output": "y" * 500})
    failed = k % 10 == 9
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"task {k // SAMPLES}"}]},
        "response": {"id": f"r{k}", "output": output},
        "reward": 0.0 if failed else float(k % 2),
        "failure": {"stage": "run", "type": "timeout", "message": "run exceeded 3600s"} if failed else None,
        "timings": {"init_s": 0.3, "run_s": 2.0, "eval_s": 0.4, "total_s": 2.8},
        "num_turns": 4,
        "host": f"node-{k % 4}",
        "attempts": 1,
    }


async def serve(port: int, journal_dir: str, records: int) -> None:
    import uvicorn
    from fastapi import FastAPI

    from prorl_gym.dashboard.server import Dashboard, DashboardConfig
    from prorl_gym.jobs.journal import Journal
    from prorl_gym.jobs.manager import JobManager
    from prorl_gym.wire.jobs import JobLimits, SubmitRequest
    from prorl_gym.wire.records import RolloutRecord

    counter = iter(range(records))
    running = asyncio.Semaphore(64)  # as stage pools would: not 10,000 records alive at once

    async def rollout(row: dict) -> RolloutRecord:
        async with running:
            await asyncio.sleep(0)
            return RolloutRecord.model_validate(record(next(counter)))

    limits = JobLimits(max_active_jobs=records, max_batch_jobs=records)
    jobs = JobManager(rollout, limits, journal=Journal(Path(journal_dir) / "agent.sqlite"))
    await jobs.start()
    rows = [{"responses_create_params": {"input": f"task {k}"}} for k in range(records // SAMPLES)]
    await jobs.submit(SubmitRequest(rows=rows, batch_id="big", samples_per_row=SAMPLES))
    while not jobs.batch_views()[0].done:
        await asyncio.sleep(0.2)
    app = FastAPI()
    Dashboard(jobs, DashboardConfig(cache_s=0.0), environment="math", stages=dict).mount(app)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    print("ready", jobs.journal.size_on_disk(), flush=True)
    await server.serve()
    await jobs.close()


# ---------------------------------------------------------------------------- this process: the viewer


def measure(records: int, requests: int) -> dict:
    from prorl_gym.stack import free_port

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="prorl-dash-bench-") as journal_dir:
        command = [sys.executable, "-m", "benchmarks.dashboard", "--serve", str(port), journal_dir, str(records)]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            started = time.monotonic()
            ready = server.stdout.readline().split()
            assert ready and ready[0] == "ready", "the server did not start"
            fill_s = time.monotonic() - started
            base = f"http://127.0.0.1:{port}/dashboard/api"
            for _ in range(100):  # uvicorn listening
                try:
                    urllib.request.urlopen(f"{base}/live", timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.05)

            def cost(path: str, n: int) -> tuple[float, int]:
                """Server CPU seconds per request, and the answer's size."""
                before = cpu_s(server.pid)
                size = 0
                for _ in range(n):
                    size = len(urllib.request.urlopen(base + path, timeout=60).read())
                return (cpu_s(server.pid) - before) / n, size

            rss_before_index = rss_mib(server.pid)
            first_search_s, _ = cost("/rollouts?batch=big&limit=50", 1)
            rss_after_index = rss_mib(server.pid)
            routes = {
                "live_uncached": "/live",
                "search": "/rollouts?batch=big&limit=50",
                "search_filtered": "/rollouts?batch=big&failure=timeout&offset=450&limit=50",
                "open": f"/rollout?job_id=big/{records // SAMPLES // 2}/3",
            }
            results = {}
            for name, path in routes.items():
                cpu, size = cost(path, requests)
                results[f"{name}_cpu_ms"] = ms(cpu)
                results[f"{name}_bytes"] = size
            return {
                "records": records,
                "requests_each": requests,
                "journal_mib": round(int(ready[1]) / 2**20, 1),
                "fill_s": round(fill_s, 1),
                "first_search_cpu_ms": ms(first_search_s),
                **results,
                "server_rss_mib_before_index": rss_before_index,
                "server_rss_mib_after_index": rss_after_index,
            }
        finally:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "JOURNAL_DIR", "RECORDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        port, journal_dir, records = args.serve
        asyncio.run(serve(int(port), journal_dir, int(records)))
        return
    emit("dashboard", measure(args.records, args.requests))


if __name__ == "__main__":
    run_cli(main)
