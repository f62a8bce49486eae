# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Driving a running stack's agent directly, as a trainer does: POST rows to /run."""

from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager
from dataclasses import dataclass

import aiohttp

from benchmarks.common import sandbox_root
from prorl_gym.client import agent_url
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack

MATH_EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"


def math_rows() -> list[dict]:
    return read_jsonl(MATH_EXAMPLE)


async def drive(url: str, rows: list[dict], concurrency: int) -> tuple[list[dict], float]:
    """Run every row once through /run, `concurrency` at a time; (records, wall seconds)."""
    slots = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=3600)) as http:

        async def one(row: dict) -> dict:
            async with slots, http.post(f"{url}/run", json=row) as response:
                response.raise_for_status()
                return await response.json(content_type=None)

        started = time.perf_counter()
        records = await asyncio.gather(*(one(row) for row in rows))
        return records, time.perf_counter() - started


@contextmanager
def math_stack(overrides: list[str], policy_args: list[str]):
    """configs/math.yaml under ng_run plus the scripted policy; yields where they listen."""
    with sandbox_root() as root:
        overrides = [f"+math.resources_servers.math.sandbox.root_dir={root}", *overrides]
        log_dir = REPO_ROOT / "results" / "bench" / "logs"
        with Stack(
            environment("math").config_paths(),
            overrides=overrides,
            policy_data=[str(MATH_EXAMPLE)],
            policy_args=policy_args,
            log_dir=log_dir,
        ) as stack:
            yield Bench(
                asyncio.run(agent_url(f"http://127.0.0.1:{stack.head_port}", "math_agent")),
                f"http://127.0.0.1:{stack.policy_port}",
                stack.pids,
            )


@dataclass
class Bench:
    agent_url: str
    policy_url: str  # the scripted policy's own root (GET /stats: its busy time)
    pids: list[int]  # the stack's own processes: CPU accounting walks their descendants (benchmarks/cpu.py)

    async def policy_busy_s(self) -> float:
        async with aiohttp.ClientSession() as http, http.get(f"{self.policy_url}/stats") as response:
            return (await response.json())["busy_s"]
