# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What SWE grading costs per rollout: `evaluate_patch` on the gold patch of each example task, against
the baseline measured in the same run: a plain single run of the same tests in a fresh sandbox (stage
the repository, `git apply` the patch, run the runner on FAIL_TO_PASS + PASS_TO_PASS once; no guard,
no canaries, no fingerprints). The team bounds the overhead of the anti-tamper machinery to 1.5x.

    python -m benchmarks.swe_grading [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import time

from benchmarks.common import emit, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.grading import test_ids
from resources_servers.swe.repos import ENV_MOUNT, prepare_repo, prepare_test_env, repo_env, stage_repo, task_spec
from resources_servers.swe.tests.test_tasks import EXAMPLES


async def plain_run(row: dict, spec: SandboxSpec) -> float:
    """The baseline: one run of the graded tests, as a grader that trusted everything would do it."""
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    ids = test_ids(row, "FAIL_TO_PASS") + test_ids(row, "PASS_TO_PASS")
    if row.get("test_runner") == "unittest":
        command = "python -m unittest -v " + " ".join(map(shlex.quote, ids))
    else:
        command = "python -m pytest -p no:cacheprovider -o addopts= -rA " + " ".join(map(shlex.quote, ids))
    started = time.monotonic()
    async with await create_sandbox(task_spec(spec, row, repo, env)) as sb:
        path = await stage_repo(sb, row, scrub=False)
        await sb.write_file("/tmp/fix.diff", row["patch"])
        pythonpath = ":".join(p for p in [repo_env(row).pythonpath, f"{ENV_MOUNT}/site-packages" if env else ""] if p)
        script = (
            f"cd {path} && git apply /tmp/fix.diff && PYTHONPATH={pythonpath} {command} > /tmp/log 2>&1; echo rc=$?"
        )
        result = await sb.bash(script, timeout=300)
        assert "rc=0" in result.output, result.output
    return time.monotonic() - started


async def graded(row: dict, spec: SandboxSpec) -> float:
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    started = time.monotonic()
    result = await evaluate_patch(row, row["patch"], spec, repo, 300, test_env=env)
    assert result["reward"] == 1.0, result
    return time.monotonic() - started


async def main(repeats: int) -> None:
    with sandbox_root() as root:
        spec = SandboxSpec(root_dir=root)
        for row in EXAMPLES:  # warm: repositories and environments built, files cached
            await plain_run(row, spec)
        rows = {}
        for row in EXAMPLES:
            plain = [await plain_run(row, spec) for _ in range(repeats)]
            grade = [await graded(row, spec) for _ in range(repeats)]
            p, g = statistics.median(plain), statistics.median(grade)
            rows[row["instance_id"]] = {
                "tests": len(row["FAIL_TO_PASS"]) + len(row["PASS_TO_PASS"]),
                "plain_s": round(p, 3),
                "graded_s": round(g, 3),
                "ratio": round(g / p, 2),
            }
            print(row["instance_id"], rows[row["instance_id"]], flush=True)
    ratios = [r["ratio"] for r in rows.values()]
    emit(
        "swe_grading",
        {
            "repeats": repeats,
            "rows": rows,
            "baseline_plain_s_median": round(statistics.median(r["plain_s"] for r in rows.values()), 3),
            "graded_s_median": round(statistics.median(r["graded_s"] for r in rows.values()), 3),
            "ratio_median": round(statistics.median(ratios), 2),
            "ratio_max": max(ratios),
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    asyncio.run(main(parser.parse_args().repeats))
