# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What NeMo Gym 0.7's environment server costs a rollout: the agent's /run called directly, through its
front door (the agent's own process serving the environment server's address: environment_servers/prorl_agent),
and through NeMo Gym's legacy_agent relay (what 0.7 generates for an agent without one), in one stack.

    python -m benchmarks.environment_server [--rounds 6] [--rows 20] [--concurrency 4]

The math stack with the scripted policy; a legacy_agent relay is declared for the same agent beside its
front door. Each round runs the same rows once per path, the paths in turn (so a change in the machine's
speed falls on all three). Reported per path: the rollout's wall time (p50, as the caller sees it), the
stack's CPU-ms per rollout and each environment server process's own; then what a rollout costs each
environment server's process beyond its idle time (`environment_server_cpu_ms_per_rollout`: the clean
figure, the stack's totals vary by more than it on a shared machine) and each one's memory (PSS): the relay
is a NeMo Gym server, the front door's process a bare interpreter (the agent serves its address).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import aiohttp
import yaml

from benchmarks.common import emit, ms, percentile, sandbox_root
from benchmarks.cpu import cpu_spent, snapshot
from benchmarks.rollouts import MATH_EXAMPLE, math_rows
from prorl_gym.client import agent_url
from prorl_gym.environments import environment
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack

RELAY = "math_relay_environment_server"
RELAY_CONFIG = {
    RELAY: {
        "environment_servers": {
            "legacy_agent": {
                "entrypoint": "app.py",
                "agent_server": {"type": "responses_api_agents", "name": "math_agent"},
            }
        }
    }
}


async def server_url(head: str, name: str) -> str:
    """Where the stack's config puts server `name` (its head server's copy of the config)."""
    async with aiohttp.ClientSession() as http, http.get(f"{head}/global_config_dict_yaml") as response:
        config = yaml.safe_load(yaml.safe_load(await response.text()))
    inner = next(iter(next(iter(config[name].values())).values()))
    return f"http://{inner['host']}:{inner['port']}"


async def run_rows(url: str, rows: list[dict], concurrency: int) -> list[float]:
    """Each row once through `url`'s /run; each rollout's wall time as the caller saw it."""
    slots, times = asyncio.Semaphore(concurrency), []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as http:

        async def one(row: dict) -> None:
            async with slots:
                started = time.perf_counter()
                async with http.post(f"{url}/run", json=row) as response:
                    record = await response.json(content_type=None)
                assert response.status == 200 and record.get("reward") == 1.0, (url, response.status, record)
                times.append(time.perf_counter() - started)

        await asyncio.gather(*(one(row) for row in rows))
    return times


def pss_mib(pid: int) -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return round(int(fields["Pss"].split()[0]) / 1024, 1)


def environment_server_pid(procs: dict, folder: str) -> int:
    """The process ng_run started for the environment server in `folder` (environment_servers/<type>)."""
    for proc in procs.values():
        try:
            if Path(f"/proc/{proc.pid}/cwd").readlink().as_posix().endswith(folder):
                return proc.pid
        except OSError:
            continue
    raise LookupError(f"no process of {folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=20, help="rollouts per path per round")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    math = environment("math")
    rows = (math_rows() * (args.rows // 5 + 1))[: args.rows]
    relay_config = REPO_ROOT / "results" / "bench" / "environment_server_relay.yaml"
    relay_config.parent.mkdir(parents=True, exist_ok=True)
    relay_config.write_text(yaml.safe_dump(RELAY_CONFIG))
    with sandbox_root() as root:
        configs = [*math.config_paths(), str(relay_config.relative_to(REPO_ROOT))]
        overrides = [f"+{math.server_key}.sandbox.root_dir={root}"]
        log_dir = REPO_ROOT / "results" / "bench" / "logs"
        with Stack(configs, overrides=overrides, policy_data=[str(MATH_EXAMPLE)], log_dir=log_dir) as stack:
            head = f"http://127.0.0.1:{stack.head_port}"
            urls = {
                "direct": asyncio.run(agent_url(head, math.agent)),
                "front_door": asyncio.run(server_url(head, math.environment_server)),
                "legacy_relay": asyncio.run(server_url(head, RELAY)),
            }
            procs = snapshot(stack.pids)
            relay_pid = environment_server_pid(procs, "environment_servers/legacy_agent")
            door_pid = environment_server_pid(procs, "environment_servers/prorl_agent")
            asyncio.run(run_rows(urls["direct"], rows, args.concurrency))  # warm-up
            walls = {path: [] for path in urls}
            cpu = dict.fromkeys(urls, 0.0)
            own = {path: {"legacy_relay": 0.0, "front_door": 0.0} for path in urls}  # each server process's CPU
            for k in range(args.rounds):
                order = list(urls)[k % 3 :] + list(urls)[: k % 3]
                for path in order:
                    before = snapshot(stack.pids)
                    walls[path] += asyncio.run(run_rows(urls[path], rows, args.concurrency))
                    after = snapshot(stack.pids)
                    spent = cpu_spent(before, after)
                    cpu[path] += spent["total"] - spent.get("policy", 0.0)
                    for server, pid in (("legacy_relay", relay_pid), ("front_door", door_pid)):
                        own[path][server] += after[pid].self_s - before[pid].self_s
            pss = {"legacy_relay": pss_mib(relay_pid), "front_door": pss_mib(door_pid)}
    n = args.rounds * args.rows
    paths = {
        path: {
            "wall_p50_ms": ms(percentile(walls[path], 50)),
            "cpu_ms_per_rollout": round(cpu[path] * 1000 / n, 2),
            "environment_server_processes_cpu_ms_per_rollout": {
                k: round(v * 1000 / n, 2) for k, v in own[path].items()
            },
        }
        for path in urls
    }
    direct = paths["direct"]
    emit(
        "environment_server",
        {
            "rollouts_per_path": n,
            "concurrency": args.concurrency,
            **paths,
            "added_cpu_ms_per_rollout": {
                path: round(paths[path]["cpu_ms_per_rollout"] - direct["cpu_ms_per_rollout"], 2)
                for path in ("front_door", "legacy_relay")
            },
            "added_wall_p50_ms": {
                path: round(paths[path]["wall_p50_ms"] - direct["wall_p50_ms"], 3)
                for path in ("front_door", "legacy_relay")
            },
            # what a rollout through it costs its environment server's own process, beyond its idle time (the
            # same process's CPU while rollouts go straight to the agent): the clean figure on a busy machine
            "environment_server_cpu_ms_per_rollout": {
                server: round((own[server][server] - own["direct"][server]) * 1000 / n, 2)
                for server in ("front_door", "legacy_relay")
            },
            "process_pss_mib": pss,
        },
    )


if __name__ == "__main__":
    main()
