# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fault-injection soak: many rollouts over every environment while parts of the service are killed.

    python -m benchmarks.soak [--rollouts 1000] [--fault-every 10] [--busy N]     (make soak runs it, then soak_steady.py)

Rollouts of all environments through the job API (the example rows, many samples each,
the scripted gold policy with realistic latency) while, after every `--fault-every` finished
records, one fault is injected, the kinds in turn so each is exercised many times:
  policy      the policy endpoint killed and started again
  sandbox     a sandbox's pid 1 killed from outside (the sandbox is lost)
  shell       a sandbox's shell killed from outside        (math, STEM, code sandboxes; the
  kernel      a sandbox's Python kernel killed from outside  gold policy does a step again whose
  hang        a sandbox's shell stopped (SIGSTOP): its      tool answer says the environment
              tool call hangs past its timeout              was restarted, as a model would)
  verifier    a verifier worker killed
  server      a resources server SIGKILLed (its supervisor starts it again)
  agent       an agent SIGKILLed mid-batch (started again; its journal brings its jobs back)
and then the probe of issue 10 through ng_collect_rollouts: the SWE example x 10 with the SWE
resources server SIGKILLed mid-collection. Before the faults, `--baseline` rollouts (default: as
many as `--rollouts`, submitted the same way, so queueing is the same) run in the same stack
without any (the fault-free p99). `--busy N`: N processes of other work spin on the
CPUs for the whole run (a busy node: restarts are slow, and that is when retries ran out).
Keys (JSON, last line): submitted, records (= submitted), lost, duplicates,
infra_failures_scored_as_reward (records without a failure whose reward is not the gold policy's
1.0: a fault scored as the task's outcome), usable_fraction (records that carry the task's own
outcome: no failure, or a task failure), leaked_processes and leaked_sandbox_dirs (after the
stack stops), retried_ok, failures_by_type, faults, p99_rollout_s and p99_rollout_s_fault_free,
retry_wait_s_p99, collect_probe. Every record received is written to
results/bench/soak/records.jsonl, the same less transcripts to outcomes.jsonl.gz (small enough
to commit: results/soak/), and the full record of anything counted as duplicated or scored (and
the ids of the lost) to suspects.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import emit, percentile, raise_fd_limit
from benchmarks.soak_stack import LOG_DIR, SoakStack, busy_node, pids, read_proc, save_dashboards, soak_stack
from prorl_gym.client import ProRLClient
from prorl_gym.environments import Environment, discover
from prorl_gym.jsonl import read_jsonl, write_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox.backends.local.processes import processes_mounting
from prorl_gym.sandbox.leases import read_leases
from prorl_gym.stack import collected_records, run_cli
from prorl_gym.testing import stack_processes, supervised_server
from prorl_gym.wire.records import RolloutRecord

# The parts of stateless environments' sandboxes first: they exist only while those rollouts run.
FAULTS = ("shell", "kernel", "hang", "policy", "sandbox", "verifier", "server", "agent")
STATEFUL = {"swe"}  # its gold answer is the sandbox's state: no shell/kernel/hang faults there


def sandbox_processes(root: Path) -> dict[str, list[int]]:
    """Live sandboxes under root: pid 1, shell and kernel pids, by part (from the leases and pid namespaces)."""
    parts: dict[str, list[int]] = {"sandbox": [], "shell": [], "kernel": []}
    ours = os.readlink("/proc/self/ns/pid")
    namespaces = {}  # a sandbox's pid namespace -> its pid 1 (the lease's pid that is in its own namespace)
    for lease in read_leases(root):
        for pid in lease.pids:
            try:
                if (ns := os.readlink(f"/proc/{pid}/ns/pid")) != ours:
                    namespaces[ns] = pid
            except OSError:
                continue
    for pid in pids():
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            continue
        if ns not in namespaces:
            continue
        cmdline = read_proc(f"/proc/{pid}/cmdline").replace("\0", " ")
        if pid == namespaces[ns]:
            parts["sandbox"].append(pid)
        elif "bash" in cmdline and "-i" in cmdline:
            parts["shell"].append(pid)
        elif "zygote_main" in cmdline or "ipykernel" in cmdline:
            parts["kernel"].append(pid)
    return parts


def session_processes(session: int, needle: str) -> list[int]:
    """The stack's processes whose command line has `needle` (its servers' children included)."""
    return [pid for pid in stack_processes(session) if needle in read_proc(f"/proc/{pid}/cmdline").replace("\0", " ")]


class Faults:
    """Inject one fault of a kind; returns whether it found something to break."""

    def __init__(self, soak: SoakStack, rng: random.Random):
        self.soak, self.rng = soak, rng
        self.done: Counter[str] = Counter()

    def inject(self, kind: str) -> bool:
        hit = getattr(self, kind)()
        if hit:
            self.done[kind] += 1
        return hit

    def _kill(self, pids: list[int], sig: int = signal.SIGKILL) -> bool:
        for pid in self.rng.sample(pids, len(pids)):
            try:
                os.kill(pid, sig)
                return True
            except ProcessLookupError:
                continue
        return False

    def _sandbox_part(self, part: str, sig: int = signal.SIGKILL, stateless_only: bool = False) -> bool:
        envs = [e.name for e in self.soak.envs if not (stateless_only and e.name in STATEFUL)]
        pids = [pid for env in envs for pid in sandbox_processes(self.soak.roots[env])[part]]
        return self._kill(pids, sig)

    def policy(self) -> bool:
        self.soak.stack.restart_policy(down_s=1.0)
        return True

    def sandbox(self) -> bool:
        return self._sandbox_part("sandbox")

    def shell(self) -> bool:
        return self._sandbox_part("shell", stateless_only=True)

    def kernel(self) -> bool:
        return self._sandbox_part("kernel", stateless_only=True)

    def hang(self) -> bool:
        return self._sandbox_part("shell", signal.SIGSTOP, stateless_only=True)

    def verifier(self) -> bool:
        return self._kill(session_processes(self.soak.stack.session, "prorl_gym.verify.worker"))

    def server(self) -> bool:
        env = self.rng.choice(self.soak.envs)
        return self._kill([supervised_server(self.soak.stack.session, env.folder)])

    def agent(self) -> bool:
        folder = REPO_ROOT / "responses_api_agents" / "prorl_agent"
        try:
            return self._kill([supervised_server(self.soak.stack.session, folder)])
        except LookupError:  # being started again
            return False


async def run_rollouts(soak: SoakStack, rollouts: int, fault_every: int | None, seed: int = 0) -> Run:
    """`rollouts` over every environment through the job API; a fault after every `fault_every`
    finished records (None: no faults)."""
    rng = random.Random(seed)
    faults = Faults(soak, rng)
    per_env = {
        env.name: rollouts // len(soak.envs) + (i < rollouts % len(soak.envs)) for i, env in enumerate(soak.envs)
    }
    run = Run(faults=faults)
    finished = asyncio.Event()
    # Kinds in turn; one with nothing to break now keeps its place while the next kinds go ahead, and is
    # tried again on every tick (a sandbox part of a stateless environment exists only while one runs).
    pending = list(FAULTS * (rollouts // max(1, fault_every or 1) + 1))
    started = time.perf_counter()

    async def one_env(env: Environment) -> None:
        rows = read_jsonl(env.example)
        samples = -(-per_env[env.name] // len(rows))
        async with ProRLClient(soak.agents[env.name], timeout_s=300) as client:
            batch = await _submit(client, rows, samples)
            run.submitted += batch.job_ids
            async for record in client.stream(batch.batch_id, reconnect_s=300):
                run.records.append(record)

    async def inject() -> None:
        injected = 0
        while fault_every and pending and not finished.is_set():
            if len(run.records) >= (injected + 1) * fault_every:
                for kind in dict.fromkeys(pending):  # each kind once per tick, in queue order
                    if await asyncio.to_thread(faults.inject, kind):
                        pending.remove(kind)
                        injected += 1
                        break
            await asyncio.sleep(0.2)

    injector = asyncio.create_task(inject())
    try:
        await asyncio.gather(*(one_env(env) for env in soak.envs))
    finally:
        finished.set()
        await injector
    run.wall_s = time.perf_counter() - started
    return run


@dataclass
class Run:
    faults: Faults
    submitted: list[str] = field(default_factory=list)  # job ids
    records: list[RolloutRecord] = field(default_factory=list)
    wall_s: float = 0.0

    def p99(self, key: str) -> float:
        values = [r.timings.get(key, 0.0) for r in self.records]
        return round(percentile(values, 99), 2) if values else 0.0

    def results(self, out: Path) -> dict:
        """The figures, and every record written to out/records.jsonl; what counts against the run
        (lost, duplicated, a fault scored as an outcome) also to out/suspects.jsonl, whole."""
        records = self.records
        ids = Counter(r.job_id for r in records)
        scored = [r for r in records if r.failure is None and r.reward != 1.0]
        duplicated = [r for r in records if ids[r.job_id] > 1]
        lost = sorted(set(self.submitted) - set(ids))
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / "records.jsonl", [r.wire() for r in records])
        write_outcomes(out / "records.jsonl", out / "outcomes.jsonl.gz")
        write_jsonl(
            out / "suspects.jsonl",
            [{"why": "lost", "job_id": job_id} for job_id in lost]
            + [{"why": "duplicate", **r.wire()} for r in duplicated]
            + [{"why": "infra_failure_scored_as_reward", **r.wire()} for r in scored],
        )
        usable = [r for r in records if r.failure is None or not r.failure.infra]
        return {
            "submitted": len(self.submitted),
            "records": len(ids),
            "lost": len(lost),
            "duplicates": sum(n - 1 for n in ids.values()),
            "infra_failures_scored_as_reward": len(scored),
            "usable_fraction": round(len({r.job_id for r in usable}) / max(1, len(self.submitted)), 4),
            "retried_ok": sum(r.failure is None and r.attempts > 1 for r in records),
            "failures_by_type": dict(Counter(r.failure.type.value for r in records if r.failure)),
            "failure_examples": {r.failure.type.value: r.failure.message[:300] for r in records if r.failure},
            "faults": dict(self.faults.done),
            "p99_rollout_s": self.p99("total_s"),
            "retry_wait_s_p99": self.p99("retry_wait_s"),
            "wall_s": round(self.wall_s, 1),
            "rollouts_per_min": round(len(records) / self.wall_s * 60, 1) if self.wall_s else None,
        }


TRANSCRIPT_FIELDS = ("response", "responses_create_params", "capture")


def write_outcomes(records: Path, out: Path) -> int:
    """Every record less its transcript (attempts, failures, timings, reward, ids checks), gzipped: small
    enough to keep with the code (results/soak/), where records.jsonl is tens of MB."""
    with open(records) as src, gzip.open(out, "wt") as dst:
        n = 0
        for line in src:
            record = json.loads(line)
            dst.write(json.dumps({k: v for k, v in record.items() if k not in TRANSCRIPT_FIELDS}) + "\n")
            n += 1
    return n


async def _submit(client: ProRLClient, rows: list[dict], samples: int):
    for _ in range(60):  # the agent may be restarting (a fault of another environment's run)
        try:
            return await client.submit(rows, samples_per_row=samples)
        except Exception:  # noqa: BLE001 - retried; the last attempt raises
            await asyncio.sleep(1)
    return await client.submit(rows, samples_per_row=samples)


def collect_probe(soak: SoakStack, env: Environment, repeats: int, kill_after_s: float, out: Path) -> dict:
    """ng_collect_rollouts of env's example x repeats, its resources server SIGKILLed `kill_after_s` in."""
    output = out / f"probe_{env.name}.jsonl"
    killer = threading.Timer(
        kill_after_s, lambda: os.kill(supervised_server(soak.stack.session, env.folder), signal.SIGKILL)
    )
    killer.start()
    try:
        soak.stack.collect(env.agent, env.example, output, num_repeats=repeats)
    finally:
        killer.cancel()
    records = collected_records(output)
    rows = len(read_jsonl(env.example)) * repeats
    return {
        "env": env.name,
        "rows": rows,
        "records": len(records),
        "failures_by_type": dict(Counter(r["failure"]["type"] for r in records if r.get("failure"))),
        "retried_ok": sum(not r.get("failure") and r.get("attempts", 1) > 1 for r in records),
    }


def leaks(session: int, roots: dict[str, Path]) -> dict:
    """After the stack stopped: processes of its session or of its sandboxes (a mount from one of its
    roots: also one orphaned by a dead parent), and sandbox dirs or leases. Other sandboxes of the
    machine (another stack's) are not this soak's."""
    processes = {pid for root in roots.values() for pid in processes_mounting(f"{root}/")}
    for pid in pids():
        try:
            if os.getsid(pid) == session:
                processes.add(pid)
        except OSError:
            continue
    dirs = [p for root in roots.values() if root.exists() for p in root.iterdir() if not p.name.startswith(".")]
    leases = [p for root in roots.values() for p in (root / ".leases").glob("*.json")]
    return {"leaked_processes": len(processes), "leaked_sandbox_dirs": len(dirs) + len(leases)}


def soak_faults(
    rollouts: int, fault_every: int, envs: list[Environment], log_dir: Path, probe_repeats: int, baseline: int = 0
) -> dict:
    swe = next((e for e in envs if e.name == "swe"), envs[0])
    with soak_stack(envs, log_dir, latency_ms=150) as soak:
        fault_free = asyncio.run(run_rollouts(soak, baseline, None)) if baseline else None
        results = asyncio.run(run_rollouts(soak, rollouts, fault_every)).results(log_dir)
        if fault_free is not None:
            results["p99_rollout_s_fault_free"] = fault_free.p99("total_s")
            results["fault_free_rollouts"] = len(fault_free.records)
        if probe_repeats:
            results["collect_probe"] = collect_probe(soak, swe, probe_repeats, 10.0, log_dir)
        results["dashboards"] = save_dashboards(soak, log_dir)
        session, roots = soak.stack.session, dict(soak.roots)
        soak.stack.stop()
        # SIGKILLed processes take a moment to go (a busy machine: seconds); a leak is one still there after 30 s.
        deadline = time.monotonic() + 30
        while (found := leaks(session, roots))["leaked_processes"] and time.monotonic() < deadline:
            time.sleep(0.5)
        results |= found
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--fault-every", type=int, default=10, help="a fault after every N finished records")
    parser.add_argument("--probe-repeats", type=int, default=10, help="ng_collect_rollouts probe: SWE example x N")
    parser.add_argument(
        "--baseline", type=int, default=None, help="fault-free rollouts first, in the same stack (default: --rollouts)"
    )
    parser.add_argument("--busy", type=int, default=0, help="processes of other work spinning on the CPUs meanwhile")
    args = parser.parse_args()
    raise_fd_limit()
    if LOG_DIR.exists():
        shutil.rmtree(LOG_DIR)
    with busy_node(args.busy):
        results = soak_faults(
            args.rollouts,
            args.fault_every,
            discover(),
            LOG_DIR,
            args.probe_repeats,
            args.rollouts if args.baseline is None else args.baseline,
        )
        emit("soak", results | {"busy_processes": args.busy})


if __name__ == "__main__":
    run_cli(main)
