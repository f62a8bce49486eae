# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Side by side with what a NeMo Gym user would pick instead, in one run, on the same workload.

    python -m benchmarks.peer_nemo_gym [--rollouts 192] [--concurrency 64]

Peer: nemo-gym's own math-with-Python environment, `resources_servers/math_with_code`
(an `execute_python` tool run by a per-session multiprocessing worker with `exec` and trimmed
builtins: no isolation, no IPython) driven by its `simple_agent`. Ours: the math environment
and the ProRL agent (a bubblewrap sandbox and a fresh IPython kernel per rollout). Both under
ng_run, behind the same model server (balanced_vllm_model) and the scripted policy playing the
same 4 Python calls + boxed answer (renamed `execute_python` for the peer), rows driven at each
agent's `/run` at the same concurrency. Reported: rollouts per minute, a Python tool call's p50
through its HTTP route (`/execute_python` vs `/python`, one session, sequential), and CPU per
rollout from /proc over the whole stack but the scripted policy (benchmarks/cpu.py).
The peer's servers run from a scratch directory of links (ng_run wants server paths relative
to where it runs); nothing of this repository changes. Then SWE-ReX's shell against ours
(benchmarks/peer_swerex.py: `echo hi` p50 and a shell's start, `swerex_vs_ours_bash_echo`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import nemo_gym

from benchmarks import peer_swerex
from benchmarks.common import emit, percentile, raise_fd_limit, sandbox_root
from benchmarks.cpu import cpu_spent, harness_ms_per_rollout, ms_per_rollout_by_kind, snapshot
from benchmarks.rollouts import MATH_EXAMPLE, drive, math_rows
from prorl_gym.client import agent_url
from prorl_gym.environments import environment
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack, run_cli

SITE = Path(nemo_gym.__file__).resolve().parents[1]  # where nemo-gym's own servers are installed
PEER_SERVER = "resources_servers/math_with_code"
PEER_AGENT = "responses_api_agents/simple_agent"
PEER_RELAY = "environment_servers/legacy_agent"  # 0.7 collects through it: math_with_code.yaml declares one
MODEL = "responses_api_models/balanced_vllm_model"
CALL = "answer = 6 * 7\nprint(answer)"


def peer_rows() -> list[dict]:
    """Our math example rows as the peer reads them: its tool, its answer field."""
    peer_example = json.loads((SITE / PEER_SERVER / "data" / "example.jsonl").read_text().splitlines()[0])
    tools = peer_example["responses_create_params"]["tools"]
    rows = []
    for row in math_rows():
        params = row["responses_create_params"] | {"tools": tools}
        rows.append({"responses_create_params": params, "expected_result": row["expected_answer"]})
    return rows


def peer_root(scratch: Path) -> Path:
    """A directory ng_run can run the peer from: links to its servers, our model server, configs, venvs."""
    links = {
        PEER_SERVER: SITE / PEER_SERVER,
        PEER_AGENT: SITE / PEER_AGENT,
        PEER_RELAY: SITE / PEER_RELAY,
        "responses_api_models": REPO_ROOT / "responses_api_models",
        "configs": REPO_ROOT / "configs",
        "prorl_gym": REPO_ROOT / "prorl_gym",
        "resources_servers/math": REPO_ROOT / "resources_servers" / "math",  # the scripted policy's recorded actions
    }
    for path in (PEER_SERVER, PEER_AGENT, PEER_RELAY, MODEL):
        links[f".venvs/{path}/.venv"] = REPO_ROOT / ".venv"
    for name, target in links.items():
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        (scratch / name).symlink_to(target)
    return scratch


async def tool_p50_ms(server_url: str, seed: dict | None, route: str, body: dict, calls: int) -> float:
    """A tool call's latency through its HTTP route, in one session (seeded first when `seed`)."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # keeps 127.0.0.1's cookie
        if seed is not None:
            async with http.post(f"{server_url}/seed_session", json=seed) as r:
                r.raise_for_status()
        times = []
        for _ in range(calls + 5):
            started = time.perf_counter()
            async with http.post(f"{server_url}{route}", json=body) as r:
                r.raise_for_status()
                await r.read()
            times.append(time.perf_counter() - started)
        if seed is not None:
            await http.post(f"{server_url}/release", json={})
        return round(percentile(times[5:], 50) * 1000, 3)


async def measure(stack: Stack, agent: str, server: str, rows: list[dict], args, tool: tuple) -> dict:
    url = await agent_url(f"http://127.0.0.1:{stack.head_port}", agent)
    await drive(url, rows * 2, 8)  # warm-up
    before = snapshot(stack.pids)
    records, wall = await drive(url, (rows * (args.rollouts // len(rows) + 1))[: args.rollouts], args.concurrency)
    cpu = cpu_spent(before, snapshot(stack.pids))
    route, body, seed = tool
    return {
        "rollouts_per_min": round(len(records) / wall * 60, 1),
        "mean_reward": statistics.fmean(r.get("reward", 0.0) for r in records),
        "cpu_ms_per_rollout": harness_ms_per_rollout(cpu, len(records)),
        "cpu_ms_per_rollout_by_kind": ms_per_rollout_by_kind(cpu, len(records)),
        "python_call_p50_ms": await tool_p50_ms(stack.server_urls()[server], seed, route, body, args.calls),
    }


def run_peer(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="prorl-peer-") as scratch:
        root = peer_root(Path(scratch))
        rows_file = root / "peer_rows.jsonl"
        rows = peer_rows()
        rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        configs = [
            "configs/base.yaml",
            f"{PEER_SERVER}/configs/math_with_code.yaml",
            f"{MODEL}/configs/balanced_vllm_model.yaml",
        ]
        agent = "math_with_code_simple_agent"
        overrides = [f"+{agent}.responses_api_agents.simple_agent.max_steps=8"]
        with Stack(
            configs,
            overrides=overrides,
            policy_data=[str(MATH_EXAMPLE)],
            policy_args=["--tool-calls", "4", "--tool-alias", "python=execute_python"],
            log_dir=REPO_ROOT / "results" / "bench" / "logs" / "peer",
            root=root,
        ) as stack:
            return asyncio.run(
                measure(stack, agent, "math_with_code", rows, args, ("/execute_python", {"code": CALL}, None))
            )


def run_ours(args) -> dict:
    with sandbox_root() as root:
        server, agent = "+math.resources_servers.math", "+math_agent.responses_api_agents.prorl_agent"
        # as benchmarks/rollout_throughput runs it: stage pools as wide as the concurrency, 8 sandboxes ahead
        workers = [
            f"{agent}.{pool}={args.concurrency}"
            for pool in ("max_init_workers", "max_run_workers", "max_eval_workers")
        ]
        overrides = [f"{server}.sandbox.root_dir={root}", f"{server}.warm_pool_size=8", *workers]
        with Stack(
            environment("math").config_paths(),
            overrides=overrides,
            policy_data=[str(MATH_EXAMPLE)],
            policy_args=["--tool-calls", "4"],
            log_dir=REPO_ROOT / "results" / "bench" / "logs" / "ours",
        ) as stack:
            seed = math_rows()[0]
            return asyncio.run(
                measure(stack, "math_agent", "math", math_rows(), args, ("/python", {"code": CALL}, seed))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=192)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=100, help="tool calls timed through each HTTP route")
    args = parser.parse_args()
    raise_fd_limit()
    peer, ours = run_peer(args), run_ours(args)
    print(f"peer {peer}\nours {ours}", flush=True)
    shells = asyncio.run(peer_swerex.compare(args.calls))
    emit(
        "peer_nemo_gym",
        {
            "rollouts": args.rollouts,
            "concurrency": args.concurrency,
            "peer_rollouts_per_min": peer["rollouts_per_min"],
            "ours_rollouts_per_min": ours["rollouts_per_min"],
            "peer_python_call_p50_ms": peer["python_call_p50_ms"],
            "ours_python_call_p50_ms": ours["python_call_p50_ms"],
            "peer_cpu_ms_per_rollout": peer["cpu_ms_per_rollout"],
            "ours_cpu_ms_per_rollout": ours["cpu_ms_per_rollout"],
            "peer_mean_reward": peer["mean_reward"],
            "ours_mean_reward": ours["mean_reward"],
            **shells,
        },
    )


if __name__ == "__main__":
    run_cli(main)
