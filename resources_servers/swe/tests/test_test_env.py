# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Tasks whose tests need more than pytest: the recipe's pinned `test_requires` are installed once
into a cached environment, bound read-only into the agent's sandbox and the EVAL sandbox alike; an
environment that cannot be built is an error with pip's output, never a reward."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import RepoPrepError, prepare_repo, prepare_test_env, task_spec
from resources_servers.swe.tests.test_grading import FIX_ADD, make_repo

FREEZEGUN = "freezegun==1.5.5"


@pytest.fixture(scope="module")
def reachable():
    path = Path(tempfile.mkdtemp(prefix="prorl-test-env-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def row(reachable) -> dict:
    head = make_repo(
        reachable / "calc",
        {
            "calc/__init__.py": "def add(a, b):\n    return a - b  # the bug\n\n\ndef neg(a):\n    return -a\n",
            "tests/test_calc.py": """
                import datetime

                from freezegun import freeze_time

                from calc import add


                @freeze_time("2020-02-02")
                def test_add_on_a_fixed_day():
                    assert datetime.date.today().day == 2 and add(2, 3) == 5


                def test_frozen_clock():
                    with freeze_time("2021-01-01"):
                        assert datetime.date.today().year == 2021
                """,
        },
    )
    return {
        "instance_id": "calc__1.freeze",
        "base_commit": head,
        "FAIL_TO_PASS": ["tests/test_calc.py::test_add_on_a_fixed_day"],
        "PASS_TO_PASS": ["tests/test_calc.py::test_frozen_clock"],
        "environment": {"repo_dir": str(reachable / "calc"), "pythonpath": ".", "test_requires": [FREEZEGUN]},
        "patch": FIX_ADD,
    }


async def test_a_task_with_a_test_dependency_is_graded_with_its_environment(row, reachable, sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    cache = reachable / "cache"
    env = await prepare_test_env(row, spec.kernel_python, cache)
    assert (env / "site-packages" / "freezegun").is_dir() and not (env / "site-packages" / "pytest").exists()
    assert await prepare_test_env(row, spec.kernel_python, cache) == env  # built once, then cached
    repo = await prepare_repo(row)
    gold = await evaluate_patch(row, row["patch"], spec, repo, 120, test_env=env)
    assert gold["reward"] == 1.0, gold
    noop = "diff --git a/NOTES b/NOTES\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES\n@@ -0,0 +1 @@\n+x\n"
    wrong = await evaluate_patch(row, noop, spec, repo, 120, test_env=env)
    assert (wrong["reward"], wrong["fail_to_pass_passed"], wrong["pass_to_pass_passed"]) == (0.0, 0, 1), wrong
    without = await evaluate_patch(row, row["patch"], spec, repo, 120)  # what happened before: every test errors
    assert without["reward"] == 0.0 and without["tests_passed"] == 0


async def test_the_agent_sees_the_environment_read_only(row, reachable, sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    env = await prepare_test_env(row, spec.kernel_python, reachable / "cache")
    async with await create_sandbox(task_spec(spec, row, await prepare_repo(row), env)) as sb:
        imported = await sb.bash("python -c 'import freezegun; print(freezegun.__file__)'")
        assert imported.exit_code == 0 and imported.output.startswith("/task/env/site-packages/freezegun")
        written = await sb.bash("touch /task/env/site-packages/x")
        assert written.exit_code != 0


async def test_an_environment_that_cannot_be_built_is_an_error_with_pip_output(row, reachable):
    broken = row | {"environment": row["environment"] | {"test_requires": ["freezegun==0.0.0-no-such"]}}
    with pytest.raises(RepoPrepError, match="could not be built.*freezegun"):
        await prepare_test_env(broken, SandboxSpec().kernel_python, reachable / "cache")
    with pytest.raises(RepoPrepError, match="pinned"):
        await prepare_test_env(row | {"environment": {"test_requires": ["freezegun"]}}, "python3", reachable)
