# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What both soaks (soak.py: faults; soak_steady.py: a long steady run) run on: a stack of the chosen
environments, each with its own sandbox root; the dashboards saved at the end; /proc readers; a busy node.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prorl_gym.client import agent_url
from prorl_gym.dashboard.export import save_snapshot
from prorl_gym.environments import Environment, all_config_paths
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack

LOG_DIR = REPO_ROOT / "results" / "bench" / "soak"  # each soak's logs, records and dashboards (emptied at its start)


@dataclass
class SoakStack:
    stack: Stack
    envs: list[Environment]
    roots: dict[str, Path]  # environment -> its own sandbox root
    agents: dict[str, str] = field(default_factory=dict)  # environment -> agent URL


@contextmanager
def soak_stack(envs: list[Environment], log_dir: Path, latency_ms: int, run_workers: int = 16):
    roots = {env.name: Path(tempfile.mkdtemp(prefix=f"prorl-soak-{env.name}-", dir="/tmp")) for env in envs}
    overrides = []
    for env in envs:
        roots[env.name].chmod(0o711)  # reachable by the sandbox uid
        overrides += [
            f"+{env.server_key}.sandbox.root_dir={roots[env.name]}",
            f"+{env.server_key}.sandbox.command_timeout_s=5",  # a hung tool call is interrupted after this
            f"+{env.agent_key}.retry.max_attempts=8",  # each attempt waits for the part it needs to be back
            f"+{env.agent_key}.retry.backoff_s=0.5",
            f"+{env.agent_key}.limits.policy_call_timeout_s=20",
            f"+{env.agent_key}.max_run_workers={run_workers}",
            f"+{env.agent_key}.max_init_workers={min(run_workers, 32)}",
        ]
    try:
        with Stack(
            all_config_paths(envs),
            overrides=overrides,
            policy_data=[str(env.example) for env in envs],
            policy_args=["--latency-ms", str(latency_ms)],
            log_dir=log_dir,
        ) as stack:
            soak = SoakStack(stack, envs, roots)
            head = f"http://127.0.0.1:{stack.head_port}"
            soak.agents = {env.name: asyncio.run(agent_url(head, env.agent)) for env in envs}
            yield soak
    finally:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)


def pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def read_proc(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def save_dashboards(soak: SoakStack, out: Path) -> list[str]:
    """Each agent's dashboard (the same charts as live: stages, throughput, failures by stage and type)
    as it stands at the end of the run, beside the run's logs: <out>/dashboard_<env>.html (names)."""
    saved = [save_snapshot(url, out / f"dashboard_{env}.html") for env, url in soak.agents.items()]
    return [path.name for path in saved if path is not None]


@contextmanager
def busy_node(processes: int):
    """`processes` of other work spinning on the CPUs (at normal priority) while the block runs."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
