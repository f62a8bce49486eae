# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Grading the runner cannot be talked out of: patches that leave the bug alone but make the test
runner report passes, by several different routes, score 0 with `runner_tampered` (or, when the
run never ends, with no proof); honest patches still score right. pytest on a shipped task, and
unittest on a small repository made here (its rows' test ids in unittest's dotted form)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import prepare_repo
from resources_servers.swe.tests.test_tasks import EXAMPLES, append_patch

ROW = EXAMPLES[0]
MODULE = ROW["mutation"]["file"]  # the module the failing tests import: its code runs inside the runner
TAMPERING = {
    "runtest_replaced": """
import _pytest.python
_pytest.python.Function.runtest = lambda self: None
""",
    "report_forged": """
import _pytest.reports
_orig = _pytest.reports.TestReport.from_item_and_call
def _forged(cls, item, call):
    report = _orig.__func__(cls, item, call)
    report.outcome = "passed"
    return report
_pytest.reports.TestReport.from_item_and_call = classmethod(_forged)
""",
    "plugin_registered": """
import gc
import pytest
class _Pass:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        (yield).get_result().outcome = "passed"
for _o in gc.get_objects():
    if type(_o).__name__ == "Config" and hasattr(_o, "pluginmanager"):
        _o.pluginmanager.register(_Pass(), "prorl-pass")
        break
""",
    "hook_dispatch_replaced": """
import pluggy._callers
_orig = pluggy._callers._multicall
def _multicall(hook_name, hook_impls, caller_kwargs, firstresult):
    result = _orig(hook_name, hook_impls, caller_kwargs, firstresult)
    if hook_name == "pytest_runtest_makereport" and result is not None:
        result.outcome = "passed"
    return result
pluggy._callers._multicall = _multicall
import pluggy._manager
for _o in __import__("gc").get_objects():
    if isinstance(_o, pluggy._manager.PluginManager):
        _o._inner_hookexec = _multicall
""",
    "assertions_disabled": """
import builtins
class _Silent(Exception):
    pass
builtins.AssertionError = _Silent
""",
}


@pytest.mark.parametrize("route", sorted(TAMPERING))
async def test_tampering_with_the_pytest_runner_scores_zero(route, sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    patch = await append_patch(ROW, spec, MODULE, "\n" + TAMPERING[route])
    assert (await evaluate_patch(ROW, patch, spec, await prepare_repo(ROW), 120))["reason"].startswith("refused: ")
    # past the screen (tests only): the layers behind it
    result = await evaluate_patch(ROW, patch, spec, await prepare_repo(ROW), 120, screen_code=False)
    assert result["reward"] == 0.0 and result["reason"] == "runner_tampered", result
    assert result["runner_tampered"] and result["tamper_evidence"]


async def test_exiting_early_with_fake_passes_is_no_proof(sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    ids = ROW["FAIL_TO_PASS"] + ROW["PASS_TO_PASS"]
    fake = "short test summary info".center(40, "=") + "\\n" + "".join(f"PASSED {t}\\n" for t in ids)
    exit_early = f"import os, sys\nsys.stdout.write({fake!r})\nsys.stdout.flush()\nos._exit(0)\n"
    patch = await append_patch(ROW, spec, MODULE, "\n" + exit_early)
    result = await evaluate_patch(ROW, patch, spec, await prepare_repo(ROW), 120, screen_code=False)
    assert result["reward"] == 0.0 and "did not complete" in result["reason"], result


async def test_an_honest_fix_with_a_harmless_import_time_statement_still_resolves(sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    repo = await prepare_repo(ROW)
    gold_and_more = ROW["patch"] + (await append_patch(ROW, spec, MODULE, "\n_PRORL_NOTE = 'fixed'\n"))
    result = await evaluate_patch(ROW, gold_and_more, spec, repo, 120)
    assert result["reward"] == 1.0 and not result["runner_tampered"], result


# ---------------------------------------------------------------------- unittest


def make_repo(path: Path, files: dict[str, str]) -> str:
    """A git repository at path holding files (readable by the sandbox uid); its one commit."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-C", str(path)]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(path)], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


FIX_ADD = (
    "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n"
    "@@ -1,3 +1,3 @@\n def add(a, b):\n-    return a - b  # the bug\n+    return a + b\n \n"
)


def unittest_repo(root: Path) -> dict:
    """A repository whose suite runs with `python -m unittest`, and a task row for its bug."""
    head = make_repo(
        root / "calc",
        {
            "calc/__init__.py": "def add(a, b):\n    return a - b  # the bug\n\n\ndef neg(a):\n    return -a\n",
            "tests/__init__.py": "",
            "tests/test_calc.py": '''
                import unittest

                from calc import add, neg


                class TestAdd(unittest.TestCase):
                    def test_add(self):
                        """Adding two numbers."""
                        self.assertEqual(add(2, 3), 5)

                    def test_neg(self):
                        self.assertEqual(neg(2), -2)
                ''',
        },
    )
    return {
        "instance_id": "calc__1.add",
        "base_commit": head,
        "FAIL_TO_PASS": ["tests.test_calc.TestAdd.test_add"],
        "PASS_TO_PASS": ["tests.test_calc.TestAdd.test_neg"],
        "test_patch": "",
        "test_runner": "unittest",
        "environment": {"repo_dir": str(root / "calc"), "pythonpath": "."},
        "patch": FIX_ADD,
    }


UNITTEST_TAMPERING = """
import unittest
unittest.TestCase.run = lambda self, result=None: (result.startTest(self), result.addSuccess(self), result.stopTest(self))
"""


@pytest.fixture
def reachable_dir():
    """A directory the sandbox uid can read (pytest's tmp dirs are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="prorl-unittest-repo-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_unittest_tasks_are_graded_and_tampering_is_caught(reachable_dir, sandbox_root):
    row = unittest_repo(reachable_dir)
    spec = SandboxSpec(root_dir=sandbox_root)
    repo = await prepare_repo(row)
    gold = await evaluate_patch(row, row["patch"], spec, repo, 60)
    assert gold["reward"] == 1.0 and gold["test_runner"] == "unittest", gold
    noop = "diff --git a/NOTES b/NOTES\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES\n@@ -0,0 +1 @@\n+x\n"
    wrong = await evaluate_patch(row, noop, spec, repo, 60)
    assert wrong["reward"] == 0.0 and wrong["fail_to_pass_passed"] == 0 and wrong["pass_to_pass_passed"] == 1, wrong
    tamper = noop.replace("NOTES", "calc/tamper.py").replace("+x\n", "") + "".join(
        f"+{line}\n" for line in UNITTEST_TAMPERING.strip().splitlines()
    )
    tamper = tamper.replace("@@ -0,0 +1 @@", f"@@ -0,0 +1,{len(UNITTEST_TAMPERING.strip().splitlines())} @@")
    init = (
        "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n"
        "@@ -1,2 +1,3 @@\n+from calc import tamper  # noqa\n def add(a, b):\n     return a - b  # the bug\n"
    )
    result = await evaluate_patch(row, tamper + init, spec, repo, 60, screen_code=False)
    assert result["reward"] == 0.0 and result["reason"] == "runner_tampered", result
    assert json.dumps(result["tamper_evidence"])
