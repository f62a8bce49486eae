# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Django's and SymPy's own runners, graded as pytest and unittest are: real tasks of Django 5.2.8 and
SymPy 1.14.0 (data/tasks.jsonl), real sandboxes, the grader's own path.

- SWE-bench's ids resolve to the tests they name (Django's docstring lines, SymPy's bare names), and the
  runners read their logs as SWE-bench's parsers do (tests/test_official.py: the rules themselves);
- gold 1.0; a patch that changes nothing the tests see 0.0 (every FAIL_TO_PASS failing, every
  PASS_TO_PASS passing);
- tampering, as an adversarial policy would try it against these runners (the SWE README's classes):
  the runner or its settings rewritten (tests/runtests.py, tests/test_sqlite.py, sympy/testing/), the
  failing tests rewritten, and from inside the test process: unittest's or SymPy's reporting replaced,
  Django's runner given another result class, a run that exits early. None fixes the bug: every one
  scores 0.0.

Each graded run of these suites costs tens of seconds on a loaded machine: `make test` tries one attempt
from inside the test process per runner; `make test-swe-full` (PRORL_SWE_FULL=1) tries all of them.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import prepare_repo, prepare_test_env, stage_repo, task_spec
from resources_servers.swe.runners import Django, Sympy, django_dotted
from resources_servers.swe.steps import agent_diff

DATA = Path(__file__).resolve().parents[1] / "data"
TASKS = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines()]
DJANGO = next(t for t in TASKS if t["repo"] == "django/django")
SYMPY = next(t for t in TASKS if t["repo"] == "sympy/sympy")
FULL = os.environ.get("PRORL_SWE_FULL") == "1"
NOOP = "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+no fix\n"


@pytest.fixture
def spec(sandbox_root) -> SandboxSpec:
    return SandboxSpec(root_dir=sandbox_root)


async def grade(row: dict, patch: str, spec: SandboxSpec) -> dict:
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    return await evaluate_patch(row, patch, spec, repo, 300, test_env=env)


async def tamper(row: dict, spec: SandboxSpec, files: dict[str, str], screen_code: bool = True) -> dict:
    """Act as the agent (write `files`; a leading + appends) in its own sandbox; grade its diff as the server
    does (screen_code=False: past the static screen, to try the guard and the controls behind it)."""
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    async with await create_sandbox(task_spec(spec, row, repo, env)) as sb:
        await stage_repo(sb, row)
        for path, text in files.items():
            if path.startswith("+"):
                path = path[1:]
                text = (await sb.read_file(f"/workspace/{path}")) + text
            await sb.write_file(f"/workspace/{path}", text)
        patch = await agent_diff(sb, row["base_commit"])
    assert patch.strip(), "the attempt produced no diff"
    return await evaluate_patch(row, patch, spec, repo, 300, test_env=env, screen_code=screen_code)


def assert_zero(result: dict) -> None:
    assert result["reward"] == 0.0, {k: result.get(k) for k in ("reason", "tamper_evidence", "dropped", "log_tail")}
    assert result.get("fail_to_pass_passed", 0) == 0 or result["runner_tampered"], result


# ---------------------------------------------------------------------- ids


def test_swebench_ids_resolve_to_the_tests_they_name():
    source = textwrap.dedent(
        '''
        class T(SimpleTestCase):
            def test_plain(self):
                pass

            def test_documented(self):
                """Documented tests are named by this line.

                Not by this one."""

        class U(T):
            def test_documented(self):
                """Documented tests are named by this line."""
        '''
    )
    names = Django().resolve(
        ["test_plain (a.tests.T.test_plain)", "test_plain (a.tests.T)", "Documented tests are named by this line."],
        {"tests/a/tests.py": source},
    )
    assert names == {
        "test_plain (a.tests.T.test_plain)": ["a.tests.T.test_plain"],
        "test_plain (a.tests.T)": ["a.tests.T.test_plain"],
        "Documented tests are named by this line.": ["a.tests.T.test_documented", "a.tests.U.test_documented"],
    }
    assert Django().parse_id("a.tests.T.test_plain").file == "tests/a/tests.py"
    assert django_dotted("Documented tests are named by this line.") is None
    sources = {"s/tests/test_a.py": "def test_x():\n    pass\n", "s/tests/test_b.py": "def test_x():\n    pass\n"}
    assert Sympy().resolve(["test_x", "test_y"], sources) == {
        "test_x": ["s/tests/test_a.py::test_x", "s/tests/test_b.py::test_x"],
        "test_y": ["test_y"],
    }
    log = "s/tests/test_a.py[2] \ntest_w ok\ntest_x F                 [FAIL]\n"
    assert Sympy().parse(log, ["s/tests/test_a.py::test_w", "s/tests/test_a.py::test_x"]) == {
        "s/tests/test_a.py::test_w": "passed",
        "s/tests/test_a.py::test_x": "failed",  # swebench never reads a file's last line: we do
    }


# ---------------------------------------------------------------------- gold and no-op


@pytest.mark.parametrize("row", [DJANGO, SYMPY], ids=["django", "sympy"])
async def test_gold_resolves_and_a_patch_that_changes_nothing_does_not(row, spec):
    gold = await grade(row, row["patch"], spec)
    assert gold["reward"] == 1.0 and gold["test_runner"] == row["test_runner"], gold
    assert gold["canaries"]["renamed"] > 0, gold["canaries"]
    nothing = await grade(row, NOOP, spec)
    assert nothing["reward"] == 0.0 and not nothing["runner_tampered"], nothing
    assert nothing["fail_to_pass_passed"] == 0 and nothing["pass_to_pass_passed"] == len(row["PASS_TO_PASS"])


# ---------------------------------------------------------------------- tampering

# Imported with the code under test (appended to the module the bug is in).
DJANGO_IN_PROCESS = {
    "every test passes": "import unittest\nunittest.TestCase.run = lambda self, result=None: result.addSuccess(self)\n",
    "failures reported as passes": "import unittest\nunittest.TextTestResult.addFailure = unittest.TextTestResult.addSuccess\n"
    "unittest.TextTestResult.addError = lambda self, test, err: self.addSuccess(test)\n",
    "a result class of its own": textwrap.dedent(
        """
        import unittest
        class _Lenient(unittest.TextTestResult):
            def addFailure(self, test, err):
                self.addSuccess(test)
            addError = addFailure
        unittest.TextTestRunner.resultclass = _Lenient
        """
    ),
    "Django's runner told to use it": textwrap.dedent(
        """
        import unittest
        import django.test.runner
        class _Lenient(unittest.TextTestResult):
            def addFailure(self, test, err):
                self.addSuccess(test)
            addError = addFailure
        django.test.runner.DiscoverRunner.get_resultclass = lambda self: _Lenient
        """
    ),
    "the run ends early": "import os\nos._exit(0)\n",
}
SYMPY_IN_PROCESS = {
    "failures reported as passes": textwrap.dedent(
        """
        import sympy.testing.runtests as _r
        _r.PyTestReporter.test_fail = lambda self, exc_info: self.test_pass()
        _r.PyTestReporter.test_exception = lambda self, exc_info: self.test_pass()
        """
    ),
    "a runner that passes everything": textwrap.dedent(
        """
        import sympy.testing.runtests as _r
        def _test_file(self, filename, *args, **kwargs):
            self._reporter.entering_filename(filename, 1)
            self._reporter.leaving_filename()
        _r.SymPyTests.test_file = _test_file
        """
    ),
    "the run ends early": "import os\nos._exit(0)\n",
}


def failing_tests_rewritten(row: dict) -> dict[str, str]:
    """The failing tests' module with every one of them redefined to pass (appended)."""
    if row["test_runner"] == "django":
        dotted = [django_dotted(t) for t in row["FAIL_TO_PASS"] if django_dotted(t)]
        path = Django().parse_id(dotted[0]).file
        body = "".join(f"{d.split('.')[-2]}.{d.split('.')[-1]} = lambda self: None\n" for d in dotted)
    else:
        path = row["test_directives"][0]
        body = "".join(f"def {name}():\n    pass\n" for name in row["FAIL_TO_PASS"])
    return {"+" + path: "\n\n" + body}


@pytest.mark.parametrize(
    "row, files",
    [
        (DJANGO, {"+tests/runtests.py": "\nimport sys\nsys.exit(0)\n"}),
        (DJANGO, {"+tests/test_sqlite.py": "\nTEST_RUNNER = 'django.test.runner.DiscoverRunner'\nDEBUG = True\n"}),
        (DJANGO, failing_tests_rewritten(DJANGO)),
        (SYMPY, {"+sympy/testing/runtests.py": "\nPyTestReporter.test_fail = lambda self, e: self.test_pass()\n"}),
        (SYMPY, failing_tests_rewritten(SYMPY)),
    ],
    ids=["django-runtests", "django-settings", "django-tests", "sympy-runner", "sympy-tests"],
)
async def test_the_runner_and_the_tests_are_not_the_patchs(row, files, spec):
    result = await tamper(row, spec, files)
    assert_zero(result)
    assert set(p.removeprefix("+") for p in files) <= set(result["test_files_dropped"]), result


IN_PROCESS_DEFAULT = {"Django's runner told to use it", "a runner that passes everything"}  # one per runner


def in_process(row: dict, payloads: dict[str, str]):
    full = "make test-swe-full (PRORL_SWE_FULL=1) tries it; make test tries one per runner"
    return [
        pytest.param(
            row,
            what,
            id=f"{row['test_runner']}-{what}",
            marks=[] if FULL or what in IN_PROCESS_DEFAULT else pytest.mark.skip(reason=full),
        )
        for what in payloads
    ]


@pytest.mark.parametrize("row, what", in_process(DJANGO, DJANGO_IN_PROCESS) + in_process(SYMPY, SYMPY_IN_PROCESS))
async def test_tampering_from_inside_the_test_process_scores_zero(row, what, spec):
    """Past the static screen (which refuses most of these: the runner's internals), the guard and the
    controls alone: zero, with the reason the run gave."""
    payloads = DJANGO_IN_PROCESS if row["test_runner"] == "django" else SYMPY_IN_PROCESS
    result = await tamper(row, spec, {"+" + row["mutation"]["file"]: "\n\n" + payloads[what]}, screen_code=False)
    assert_zero(result)
