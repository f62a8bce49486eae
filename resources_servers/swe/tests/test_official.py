# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Our reading of a test log equals the official harness's, for every repository swebench lists.

swebench 5.0.2 is installed without its dependencies (`make setup`); its parsers are imported without
the package initialisers that need docker, datasets or modal (data/swebench_specs.swebench_module).
The logs: real runs here, in our sandbox, of pytest with each repository's test command (a test file
with the cases the parsers treat specially), of Django's runtests.py and of SymPy's runner on
Django 5.2.8 and SymPy 1.14.0 (their own tests plus a module of passing, failing, erroring, skipped,
documented and noisy tests); and the parsers' own edge cases, as their comments describe them. Every
log is read by every repository's rules: the readings must be equal, name for name.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Bind
from resources_servers.swe import official
from resources_servers.swe.data.projects import PROJECTS
from resources_servers.swe.data.suites import DJANGO_COMMAND, SYMPY_ENV
from resources_servers.swe.data.swebench_specs import swebench_module
from resources_servers.swe.repos import ENV_MOUNT, REPO_MOUNT, RepoCache, extract_sdist, make_readable

PARSERS = swebench_module("swebench.harness.log_parsers.python").MAP_REPO_TO_PARSER_PY
SWEBENCH_SPEC = swebench_module("swebench.types").TestSpec  # not "Test*": pytest would collect it
grading = swebench_module("swebench.harness.grading")


def theirs(repo: str, log: str) -> dict[str, str]:
    spec = SWEBENCH_SPEC(
        instance_id="x", image="x", eval_script_list=[], repo=repo, version="0", FAIL_TO_PASS=[], PASS_TO_PASS=[]
    )
    return PARSERS[repo](log, spec)


def ours(repo: str, log: str) -> dict[str, str]:
    return official.read_log(official.log_parser_for(repo), log)


def assert_agree(log: str, where: str) -> int:
    """Every repository's reading of `log`, ours and swebench's: equal. Returns how many names were read."""
    read = 0
    for repo in PARSERS:
        mine, reference = ours(repo, log), theirs(repo, log)
        assert mine == reference, f"{where}, read as {repo}: ours {mine} != swebench's {reference}"
        read += len(mine)
    return read


# ---------------------------------------------------------------------- the parsers' own edge cases

EDGE_CASES = {
    "skip summary counts": "SKIPPED [2] tests/test_a.py:10: no network\nSKIPPED tests/test_a.py::test_b\n",
    "progress artefact (pytest-5262)": "PASSED [100%]\nPASSED tests/test_a.py::test_c\n",
    "failure messages": "FAILED tests/test_a.py::test_d - AssertionError: a - b\nFAILED tests/test_a.py::test_e\n",
    "colour codes": "\x1b[32mPASSED\x1b[0m tests/test_a.py::test_f\n\x1b[31mFAILED\x1b[0m tests/t.py::test_g - x\n",
    "old pytest progress lines": "tests/test_a.py::test_h PASSED\ntests/test_a.py::test_i[a b] FAILED\n",
    "spaces in parameters": "PASSED tests/test_a.py::test_j[a b]\nFAILED tests/test_a.py::test_k[x - y] - boom\n",
    "path parameters": "PASSED t.py::test_l[/tmp/pytest-of-root/p0/f.txt]\nPASSED t.py::test_m[//host/x]\n"
    "PASSED t.py::test_n[/a/*.py]\nPASSED t.py::test_o[a/b]\n",
    "mouse buttons": "PASSED lib/test_w.py::test_p[MouseButton.LEFT]\nFAILED lib/test_w.py::test_q[MouseButton.RIGHT]\n",
    "seaborn": "tests/test_s.py::test_r PASSED [ 50%]\nPASSED tests/test_s.py::test_s\nFAILED tests/test_s.py::test_t\n",
    "xfail, error, xpass": "XFAIL t.py::test_u - reason\nERROR t.py::test_v - E\nXPASS t.py::test_w\n",
    "django results": "test_a (a.tests.T.test_a) ... ok\ntest_b (a.tests.T) ... OK\ntest_c (a.tests.T) ...  OK\n"
    "test_d (a.tests.T) ... skipped 'no'\ntest_e (a.tests.T) ... FAIL\ntest_f (a.tests.T) ... ERROR\n"
    "FAIL: test_g (a.tests.T)\nERROR: test_h (a.tests.T)\n",
    "django docstrings": "test_i (a.tests.T.test_i)\nThe first line of its docstring ... ok\n",
    "django output before ok": "test_j (a.tests.T) ... some output\nmore output\nok\n",
    "django migration output (django-7188)": "Applying sites.0002_alter_domain_unique...test_no_migrations "
    "(m.tests.T) ... ok\n",
    "django interrupted by a message": "test_k (a.T) ... Testing against Django installed in '/x' "
    "(0 silenced).\nok\ntest_l (a.T) ... Internal Server Error: /path/\nok\n"
    "test_m (a.T) ... System check identified no issues (0 silenced)\nok\n",
    "django --version": "--version is equivalent to version\n",
    "sympy": "sympy/core/tests/test_a.py[3] \ntest_n ok\ntest_o F\ntest_p E                  [FAIL]\n\n"
    "______ sympy/core/tests/test_a.py:test_p ______\n____ sympy/core/tests/test_a.py::test_o ____\n",
    "empty": "",
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases_read_as_swebench_reads_them(case):
    assert_agree(EDGE_CASES[case], case)


def test_specs_are_swebench_specs():
    """data/swebench_specs.json: 5.0.2's parser of each repository, its aliases and non-test suffixes
    (the 4.1.0 specs are checked by regenerating the file: data/swebench_specs.py)."""
    data = official.specs()
    assert {repo: official.log_parser_for(repo) for repo in PARSERS} == {r: p.__name__ for r, p in PARSERS.items()}
    registry = swebench_module("swebench.harness.log_parsers").PARSER_REGISTRY
    for name, rule in data["log_parsers"].items():
        assert registry[name].__name__ == rule and rule in official.LOG_RULES
    assert data["non_test_exts"] == swebench_module("swebench.harness.constants").NON_TEST_EXTS
    django = official.spec_for("django/django", "5.2.8")
    assert django.test_cmd == "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
    assert official.spec_for("sympy/sympy", "1.14").test_cmd.endswith("bin/test -C --verbose")
    assert official.spec_for("astropy/astropy", "5.0").test_cmd.startswith("pytest -rA")
    assert official.spec_for("toolz/toolz", "1.2.0") is None and official.spec_for("django/django", "0.1") is None


def test_directives_and_eval_scripts():
    patch = (
        "diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py\n"
        "diff --git a/tests/auth_tests/data.json b/tests/auth_tests/data.json\n"
    )
    assert official.test_directives("django/django", patch) == ["auth_tests.test_validators"]
    assert official.test_directives("sympy/sympy", patch) == ["tests/auth_tests/test_validators.py"]
    script = "#!/bin/bash\ngit apply -v -\n: '>>>>> Start Test Output'\npytest -rA t.py\n: '>>>>> End Test Output'\n"
    assert official.eval_script_command(script) == "pytest -rA t.py"
    assert official.eval_script_command("pytest -rA") is None


def test_truncated_ids_resolve_as_swebench_resolves_them():
    statuses = {"t.py::test_a[x y]": "PASSED", "t.py::test_a[x z]": "XFAIL", "t.py::test_b[p q]": "PASSED"}
    statuses |= {"t.py::test_b[p r]": "FAILED", "t.py::test_c": "SKIPPED"}
    for case in ("t.py::test_a[x", "t.py::test_b[p", "t.py::test_c", "t.py::test_d", "t.py::test_a[x y]"):
        passed = official.status_of(case, statuses) in official.PASSING
        assert passed == grading.test_passed(case, statuses), case
        failed = official.status_of(case, statuses) in (None, "FAILED", "ERROR", "SKIPPED")
        assert failed == grading.test_failed(case, statuses), case


# ---------------------------------------------------------------------- real runs

PYTEST_EDGES = textwrap.dedent(
    """
    import enum
    import sys
    import pytest


    class MouseButton(enum.Enum):
        LEFT = 1
        RIGHT = 3


    @pytest.fixture
    def broken():
        raise RuntimeError("setup - failed")


    @pytest.mark.parametrize("value", ["a b", "c", "x - y", "/tmp/data/file.txt", "//host/share", "/a/*.py"])
    def test_params(value):
        assert value != "c"


    @pytest.mark.parametrize("button", [MouseButton.LEFT, MouseButton.RIGHT])
    def test_buttons(button):
        assert button is MouseButton.LEFT


    def test_message():
        assert 1 == 2, "one - two"


    def test_prints():
        print("PASSED fake::id")
        print("FAILED other::id - nothing")


    def test_error(broken):
        pass


    @pytest.mark.skip(reason="not here")
    def test_skipped():
        pass


    @pytest.mark.xfail(reason="known")
    def test_xfail():
        assert False


    @pytest.mark.xfail(reason="fixed")
    def test_xpass():
        pass


    class TestGroup:
        @pytest.mark.parametrize("n", [1, 2])
        def test_in_class(self, n):
            assert n == 1

        def test_unicode_ü(self):
            pass
    """
)
# The pytest-family commands of swebench's specs (sphinx's tox environment runs pytest -rA --durations 25).
PYTEST_COMMANDS = ("pytest -rA", "pytest -rA -vv -o console_output_style=classic --tb=no", "pytest --no-header -rA")

DJANGO_EDGES = textwrap.dedent(
    '''
    import sys
    import unittest

    from django.test import SimpleTestCase


    class EdgeTests(SimpleTestCase):
        def test_passes(self):
            pass

        def test_documented(self):
            """Documented tests are named by this line."""

        def test_fails(self):
            self.assertEqual(1, 2)

        def test_errors(self):
            raise ValueError("x - y")

        @unittest.skip("not here")
        def test_skipped(self):
            pass

        @unittest.expectedFailure
        def test_expected_failure(self):
            self.assertEqual(1, 2)

        @unittest.expectedFailure
        def test_unexpected_success(self):
            pass

        def test_subtests(self):
            for i in range(2):
                with self.subTest(i=i):
                    self.assertEqual(i, 0)

        def test_noisy(self):
            sys.stderr.write("some output\\n")
    '''
)

SYMPY_EDGES = textwrap.dedent(
    """
    from sympy.testing.pytest import XFAIL, SKIP, raises, slow


    def test_passes():
        assert 1 + 1 == 2


    def test_fails():
        assert 1 == 2


    def test_errors():
        raise ValueError("x")


    @XFAIL
    def test_xfail():
        assert False


    @XFAIL
    def test_xpass():
        pass


    @SKIP("not here")
    def test_skipped():
        pass


    @slow
    def test_slow():
        pass


    def test_prints():
        print("test_fake ok")


    def test_last():
        pass
    """
)


async def _run(spec: SandboxSpec, setup: str, command: str) -> str:
    async with await create_sandbox(spec) as sb:
        result = await sb.bash(f"{setup} && {{ {command} > /tmp/log 2>&1; echo RAN; }}", timeout=600)
        assert not result.timed_out and "RAN" in result.output, result.output
        return (await sb.read_bytes("/tmp/log")).decode(errors="replace")


async def _tree(name: str, root: str) -> tuple[Path, Path]:
    """The project's pristine sdist tree (as data/prepare.py builds tasks from) and its test environment."""
    project = next(p for p in PROJECTS if p.name == name)
    cache = RepoCache()
    archive = await cache.sdist(f"{project.name}=={project.version}", project.sha256)
    tree = Path(root) / name
    extract_sdist(archive, tree)
    make_readable(tree, Path(root))
    return tree, await cache.test_env(list(project.test_requires), SandboxSpec().kernel_python)


async def test_real_pytest_logs_read_as_swebench_reads_them(sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root, command_timeout_s=300)
    setup = f"cd /workspace && printf %s {shlex.quote(PYTEST_EDGES)} > test_edges.py"
    for command in (*PYTEST_COMMANDS, "pytest -rA --durations 25"):
        log = await _run(spec, setup, f"python -m {command} -p no:cacheprovider test_edges.py")
        assert "short test summary info" in log, log[-2000:]
        assert assert_agree(log, command) > 0
        read = ours("pytest-dev/pytest", log)
        assert read["test_edges.py::test_message"] == "FAILED" and read["test_edges.py::test_params[c]"] == "FAILED"


async def test_real_django_log_read_as_swebench_reads_it(sandbox_root):
    tree, env = await _tree("django", sandbox_root)
    spec = SandboxSpec(
        root_dir=sandbox_root,
        binds=[Bind(src=str(tree), dst=REPO_MOUNT), Bind(src=str(env), dst=ENV_MOUNT)],
        env={"PYTHONPATH": f"/workspace:{ENV_MOUNT}/site-packages"},
        command_timeout_s=600,
    )
    setup = (
        f"cp -a {REPO_MOUNT}/. /workspace/ && cd /workspace && "
        f"printf %s {shlex.quote(DJANGO_EDGES)} > tests/utils_tests/test_prorl_edges.py"
    )
    log = await _run(spec, setup, f"python {DJANGO_COMMAND} utils_tests.test_prorl_edges utils_tests.test_timesince")
    assert "Ran " in log, log[-3000:]
    assert assert_agree(log, "runtests.py") > 20
    read = ours("django/django", log)
    assert read["test_passes (utils_tests.test_prorl_edges.EdgeTests.test_passes)"] == "PASSED"
    assert read["Documented tests are named by this line."] == "PASSED"
    assert read["test_fails (utils_tests.test_prorl_edges.EdgeTests.test_fails)"] == "FAILED"


async def test_real_sympy_log_read_as_swebench_reads_it(sandbox_root):
    tree, env = await _tree("sympy", sandbox_root)
    spec = SandboxSpec(
        root_dir=sandbox_root,
        binds=[Bind(src=str(tree), dst=REPO_MOUNT, hide_packages=False), Bind(src=str(env), dst=ENV_MOUNT)],
        env={"PYTHONPATH": f"/workspace:{ENV_MOUNT}/site-packages"},
        hidden_packages=["sympy"],  # the sandbox's Python has SymPy installed: hidden, as for a SymPy task
        command_timeout_s=600,
    )
    edges = "sympy/utilities/tests/test_prorl_edges.py"
    setup = f"cp -a {REPO_MOUNT}/. /workspace/ && cd /workspace && printf %s {shlex.quote(SYMPY_EDGES)} > {edges}"
    run = "import sys, sympy.testing.runtests as r; sys.exit(r._test(*sys.argv[1:], verbose=True))"
    files = f"{edges} sympy/combinatorics/tests/test_prufer.py"
    log = await _run(spec, setup, f"{SYMPY_ENV} python -c {shlex.quote(run)} {files}")
    assert "tests finished" in log, log[-3000:]
    assert assert_agree(log, "the SymPy runner") > 5
    read = ours("sympy/sympy", log)
    assert read["test_passes"] == "PASSED" and read["test_fails"] == "FAILED" and read["test_errors"] == "ERROR"
    assert "test_last" not in read  # the last test of a file shares its line with [OK]: swebench never reads it
    json.dumps(read)  # names are text
