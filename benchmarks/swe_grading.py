# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What SWE grading costs per rollout: `evaluate_patch` on the gold patch of each example task, against
the baseline measured in the same run: a plain single run of the same tests in a fresh sandbox (stage
the repository, `git apply` the patch, run the runner on FAIL_TO_PASS + PASS_TO_PASS once; no guard,
no canaries, no fingerprints). The team bounds the overhead of the anti-tamper machinery to 1.5x.
`--rows runners`: a Django and a SymPy task instead, their baseline SWE-bench's own command (Django's
`tests/runtests.py` with the spec's arguments on the row's test modules, SymPy's `bin/test -C --verbose`
on its test files).

    python -m benchmarks.swe_grading [--repeats 3] [--rows examples|runners]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import time

from benchmarks.common import emit, percentile, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.grading import test_ids
from resources_servers.swe.repos import ENV_MOUNT, prepare_repo, prepare_test_env, repo_env, stage_repo, task_spec
from resources_servers.swe.runners import Django
from resources_servers.swe.tests.test_project_runners import DJANGO, SYMPY
from resources_servers.swe.tests.test_tasks import EXAMPLES

# bin/test -C --verbose FILES (SWE-bench's SymPy command; the sdist has no bin/test): the runner it calls
SYMPY_TEST = (
    "SYMPY_USE_CACHE=no python -c 'import sys; from sympy.testing.runtests import _test; "
    "sys.exit(_test(*sys.argv[1:], verbose=True, sort=True))'"
)


def plain_command(row: dict) -> str:
    if row.get("test_runner") == "django":
        return f"python tests/runtests.py {Django().args} " + " ".join(map(shlex.quote, row["test_directives"]))
    if row.get("test_runner") == "sympy":
        return f"{SYMPY_TEST} " + " ".join(map(shlex.quote, row["test_directives"]))
    ids = test_ids(row, "FAIL_TO_PASS") + test_ids(row, "PASS_TO_PASS")
    if row.get("test_runner") == "unittest":
        return "python -m unittest -v " + " ".join(map(shlex.quote, ids))
    return "python -m pytest -p no:cacheprovider -o addopts= -rA " + " ".join(map(shlex.quote, ids))


async def plain_run(row: dict, spec: SandboxSpec) -> float:
    """The baseline: one run of the graded tests, as a grader that trusted everything would do it."""
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    command = plain_command(row)
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


async def main(repeats: int, which: str) -> None:
    tasks = EXAMPLES if which == "examples" else [DJANGO, SYMPY]
    with sandbox_root() as root:
        spec = SandboxSpec(root_dir=root)
        for row in tasks:  # warm: repositories and environments built, files cached
            await plain_run(row, spec)
        rows = {}
        for row in tasks:
            plain = [await plain_run(row, spec) for _ in range(repeats)]
            grade = [await graded(row, spec) for _ in range(repeats)]
            p, g = percentile(plain, 50), percentile(grade, 50)
            rows[row["instance_id"]] = {
                "runner": row.get("test_runner", "pytest"),
                "tests": len(row["FAIL_TO_PASS"]) + len(row["PASS_TO_PASS"]),
                "plain_s": round(p, 3),
                "graded_s": round(g, 3),
                "ratio": round(g / p, 2),
            }
            print(row["instance_id"], rows[row["instance_id"]], flush=True)
    ratios = [r["ratio"] for r in rows.values()]
    emit(
        "swe_grading" if which == "examples" else "swe_grading_runners",
        {
            "repeats": repeats,
            "rows_of": which,
            "rows": rows,
            "baseline_plain_s_median": round(percentile((r["plain_s"] for r in rows.values()), 50), 3),
            "graded_s_median": round(percentile((r["graded_s"] for r in rows.values()), 50), 3),
            "ratio_median": round(percentile(ratios, 50), 2),
            "ratio_max": max(ratios),
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", choices=["examples", "runners"], default="examples")
    args = parser.parse_args()
    asyncio.run(main(args.repeats, args.rows))
