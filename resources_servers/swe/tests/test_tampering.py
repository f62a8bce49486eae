# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""An adversarial policy against the SWE grader: one test per class of tampering, each with several
instances, graded through the server's own path (the agent's sandbox, its diff by `agent_diff`,
`evaluate_patch` with the row's repository and test environment). None of them fixes the bug;
every one must score 0.0, most with a reason that names what was tried. The classes
(resources_servers/swe/README.md, "What a policy can do, and what the grader guarantees"):

1. the repository configures the grader's own tools (git config, attributes, hooks, HOME);
2. modules that shadow what the runner or the tests import (stdlib, site, runner, test packages);
3. outcome semantics (xfail, skip, expected failures called or marked from the code under test);
4. hooks and state inside the test process (plugins, wrapped tests, forged reports, guard state);
5. what the agent can read (copies of the task's package in the sandbox's view of the system);
6. pytest configuration written in any syntax TOML allows.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Bind
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import prepare_repo, prepare_test_env, stage_repo, task_spec
from resources_servers.swe.steps import agent_diff
from resources_servers.swe.tests.test_tasks import EXAMPLES, overriding_tests

TOOLZ, SQLPARSE, CACHETOOLS, MORE_ITERTOOLS, HUMANIZE = EXAMPLES


def f2p_names(row: dict) -> list[str]:
    """The failing tests' function names, as a policy learns them by running the suite itself."""
    if row.get("test_runner") == "unittest":
        return sorted({t.rsplit(".", 1)[1] for t in row["FAIL_TO_PASS"]})
    return sorted({t.split("::")[-1].split("[")[0] for t in row["FAIL_TO_PASS"]})


def graded_files(row: dict) -> list[str]:
    if row.get("test_runner") == "unittest":
        return sorted({t.rsplit(".", 2)[0].replace(".", "/") + ".py" for t in row["FAIL_TO_PASS"]})
    return sorted({t.split("::")[0] for t in row["FAIL_TO_PASS"]})


async def tamper(row: dict, spec: SandboxSpec, files: dict[str, str], script: str = "") -> dict:
    """Act as the agent: write `files` (relative to the repository) and run `script` in the agent's sandbox,
    then grade the resulting diff exactly as the server does."""
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    async with await create_sandbox(task_spec(spec, row, repo, env)) as sb:
        await stage_repo(sb, row)
        for path, text in files.items():
            if path.startswith("+"):  # append to a file of the repository
                path = path[1:]
                text = (await sb.read_file(f"/workspace/{path}")) + text
            await sb.write_file(f"/workspace/{path}", text)
        if script:
            result = await sb.bash(f"cd /workspace && {script}", timeout=60)
            assert result.exit_code == 0, result.output
        patch = await agent_diff(sb, row["base_commit"])
    assert patch.strip(), "the attack produced no diff"
    # past the screen (screen.py refuses every one of these payloads: test_screen.py): the layers behind it
    return await evaluate_patch(row, patch, spec, repo, 120, test_env=env, screen_code=False)


def module_under_test(row: dict) -> str:
    return "+" + row["mutation"]["file"]


def assert_zero(result: dict, *reasons: str) -> None:
    """Reward 0.0, and (when given) one of `reasons` named in the reason, evidence, dropped or tool-config
    files; never an F2P test passed unless the run was found tampered with."""
    assert result["reward"] == 0.0, result
    assert result.get("fail_to_pass_passed", 0) == 0 or result["runner_tampered"], result
    if reasons:
        said = json.dumps(
            [result.get("reason"), result.get("tamper_evidence"), result.get("dropped"), result.get("tool_config")]
        )
        assert any(r in said for r in reasons), (reasons, said)


@pytest.fixture
def spec(sandbox_root) -> SandboxSpec:
    return SandboxSpec(root_dir=sandbox_root)


# ---------------------------------------------------------------------- payloads run inside the test process


def pytest_plugin(body: str, targets: list[str], name: str = "cheat") -> str:
    """Code that, imported with the code under test, registers a pytest plugin in the running session.
    `wanted(item)`: the item is one of `targets` (test files, or test function names)."""
    return textwrap.dedent(
        f"""

        def _{name}_install():
            import gc, os, sys, types
            import pytest
            TARGETS = {targets!r}
            def wanted(item):
                return (item.nodeid.split("::")[0] in TARGETS
                        or getattr(item, "originalname", item.name) in TARGETS or item.name in TARGETS)
            class Cheat:
        {textwrap.indent(textwrap.dedent(body), " " * 16)}
            for o in gc.get_objects():
                if type(o).__name__ == "Config" and hasattr(o, "pluginmanager"):
                    o.pluginmanager.register(Cheat(), "{name}-" + str(id(o)))
                    return
        _{name}_install()
        """
    )


WRAP_RUNTEST = """
def pytest_collection_modifyitems(self, items):
    for item in items:
        if wanted(item):
            item.runtest = lambda: None
"""
XFAIL_MARKERS = """
def pytest_collection_modifyitems(self, items):
    for item in items:
        if wanted(item):
            item.add_marker(pytest.mark.xfail(reason="known issue"))
"""
# A report hook whose code object claims a standard-library file (so no "hook from the repository" check
# trusts it less than the runner's own), registered as a module-like plugin, and any guard state silenced.
TRUSTED_NAME_HOOK = """
import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if WANTED(item):
        report.outcome, report.longrepr = "passed", None
"""


def trusted_name_hook(targets: list[str]) -> str:
    return textwrap.dedent(
        f"""

        def _trusted_install():
            import gc, sys, types
            def wanted(item):
                return getattr(item, "originalname", item.name) in {targets!r}
            ns = {{"WANTED": wanted}}
            exec(compile({TRUSTED_NAME_HOOK!r}, "/usr/lib/python3.11/_compat_pickle.py", "exec"), ns)
            for o in gc.get_objects():
                if type(o).__name__ in ("_Watch", "Watch", "Monitor") and hasattr(o, "problem"):
                    o.problem = lambda *a, **k: None
            for module in list(sys.modules.values()):
                if "guard" in (getattr(module, "__name__", "") or ""):
                    for attr in ("problem", "emit", "check", "hook_owners"):
                        if hasattr(module, attr):
                            setattr(module, attr, lambda *a, **k: None)
            for o in gc.get_objects():
                if type(o).__name__ == "Config" and hasattr(o, "pluginmanager"):
                    plugin = types.SimpleNamespace(pytest_runtest_makereport=ns["pytest_runtest_makereport"])
                    o.pluginmanager.register(plugin, "trusted")
                    return
        _trusted_install()
        """
    )


# ---------------------------------------------------------------------- 1. the repository configures the grader's tools

# Runs if any git of the grader's runs it: waits for the test run to start, then redefines the failing tests.
CHEAT_SCRIPT = """#!/bin/sh
( for i in $(seq 1 3000); do
    if ls /tmp/prorl-eval/*.log >/dev/null 2>&1 || ls /tmp/prorl-eval/*/*.log >/dev/null 2>&1; then
      printf '%b' $OVERRIDES >> "$TEST_FILE"; exit 0
    fi
    sleep 0.01
  done ) </dev/null >/dev/null 2>&1 &
[ "$1" = clean ] && cat
exit 0
"""


def cheat_script(row: dict) -> str:
    test_file, overrides = overriding_tests(row)
    return CHEAT_SCRIPT.replace("$OVERRIDES", json.dumps(overrides)).replace("$TEST_FILE", f"/workspace/{test_file}")


TOOL_CONFIG_ROUTES = {
    "fsmonitor_in_home_gitconfig": {".gitconfig": "[core]\n\tfsmonitor = /workspace/.cheat.sh\n"},
    "clean_filter_from_gitattributes": {
        ".gitconfig": '[filter "cheat"]\n\tclean = /workspace/.cheat.sh clean\n\tsmudge = cat\n',
        ".gitattributes": "* filter=cheat\n",
    },
    "fsmonitor_in_xdg_config": {".config/git/config": "[core]\n\tfsmonitor = /workspace/.cheat.sh\n"},
    "attributes_file_and_hooks": {
        ".gitconfig": "[core]\n\tattributesFile = /workspace/.attrs\n\thooksPath = /workspace/.hooks\n"
        '[filter "cheat"]\n\tclean = /workspace/.cheat.sh clean\n\tsmudge = /workspace/.cheat.sh clean\n',
        ".attrs": "* filter=cheat\n",
    },
}


@pytest.mark.parametrize("route", sorted(TOOL_CONFIG_ROUTES))
async def test_the_repository_cannot_configure_the_graders_tools(route, spec):
    row = TOOLZ
    files = dict(TOOL_CONFIG_ROUTES[route]) | {".cheat.sh": cheat_script(row)}
    files[module_under_test(row)] = "\n# touched, so that git looks at it\n"
    result = await tamper(row, spec, files, "chmod 755 .cheat.sh")
    assert_zero(result, *(path for path in TOOL_CONFIG_ROUTES[route] if not path.startswith(".attrs")))


# ---------------------------------------------------------------------- 2. shadowing modules


def stdlib_stand_in(module: str, payload: str) -> str:
    """A module named like a standard-library one: the real module, plus `payload` run when it is imported."""
    return (
        textwrap.dedent(
            f"""
        import importlib.util, sys, sysconfig
        _spec = importlib.util.spec_from_file_location("_real_{module}", sysconfig.get_paths()["stdlib"] + "/{module}.py")
        _real = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_real)
        globals().update({{k: v for k, v in vars(_real).items() if not k.startswith("__")}})
        """
        )
        + payload
    )


# Imported at interpreter start-up by the sandbox venv's distutils-precedence.pth when the repository is on
# sys.path: it makes pytest's test call skip the failing tests' bodies, before any guard exists.
STARTUP_HOOK = """
import importlib.machinery, sys
TARGETS = {targets!r}


def add_shim():
    pass


class _Patch:
    def find_spec(self, name, path=None, target=None):
        if name != "_pytest.runner":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            original = module.call_and_report

            def call_and_report(item, when, log=True, **kw):
                if getattr(item, "originalname", item.name) in TARGETS:
                    item.runtest = lambda: None
                return original(item, when, log, **kw)

            module.call_and_report = call_and_report

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Patch())
"""
# A stand-in for the standard library's unittest: the real one, with the failing tests made to pass.
FAKE_UNITTEST = """
import importlib.util, sys, sysconfig
_spec = importlib.util.spec_from_file_location(
    "unittest", sysconfig.get_paths()["stdlib"] + "/unittest/__init__.py",
    submodule_search_locations=[sysconfig.get_paths()["stdlib"] + "/unittest"])
_real = importlib.util.module_from_spec(_spec)
sys.modules["unittest"] = _real
_spec.loader.exec_module(_real)
_run = _real.TestCase.run
def run(self, result=None):
    if self._testMethodName in {targets!r}:
        setattr(self, self._testMethodName, lambda: None)
    return _run(self, result)
_real.TestCase.run = run
"""


def shadowing_routes() -> dict:
    toolz, more, cache = TOOLZ, MORE_ITERTOOLS, CACHETOOLS
    return {
        # the test imports pickle: a top-level pickle.py would make every round trip the identity
        "stdlib_module_the_test_imports": (
            toolz,
            {"pickle.py": stdlib_stand_in("pickle", pytest_plugin(WRAP_RUNTEST, f2p_names(toolz)))},
            ("shadows",),
        ),
        # a site module imported at interpreter start-up (the venv's .pth) patching the runner
        "site_module_imported_at_startup": (
            toolz,
            {
                "_distutils_hack/__init__.py": STARTUP_HOOK.format(targets=f2p_names(toolz)),
                module_under_test(toolz): "\n",
            },
            ("shadows",),
        ),
        # the guard's own module name, first on sys.path in the repository
        "the_guards_own_name": (toolz, {"prorl_pytest_guard.py": pytest_plugin(WRAP_RUNTEST, f2p_names(toolz))}, ()),
        # the standard library's unittest, for the unittest runner and for TestCase tests under pytest (src layout)
        "unittest_for_the_unittest_runner": (
            more,
            {"unittest/__init__.py": FAKE_UNITTEST.format(targets=f2p_names(more))},
            ("shadows",),
        ),
        "unittest_in_a_src_layout": (
            cache,
            {"src/unittest.py": FAKE_UNITTEST.format(targets=f2p_names(cache))},
            ("shadows",),
        ),
        # a module named like the tests' own package, earlier on sys.path than the repository root
        "the_tests_package": (cache, {"src/tests.py": "class LFUCacheTest:\n    pass\n"}, ("shadows",)),
    }


@pytest.mark.parametrize("route", sorted(shadowing_routes()))
async def test_modules_shadowing_what_the_runner_or_tests_import_do_not_load(route, spec):
    row, files, reasons = shadowing_routes()[route]
    result = await tamper(row, spec, files)
    assert_zero(result, *reasons)


# ---------------------------------------------------------------------- 3. outcome semantics


def outcome_routes() -> dict:
    unittest_expect = textwrap.dedent(
        f"""

        import unittest as _ut
        _own = _ut.TestCase.__dict__["__init_subclass__"]
        def _expect(cls, **kw):
            _own.__func__(cls, **kw)
            for name in {f2p_names(MORE_ITERTOOLS)!r}:
                if name in vars(cls):
                    getattr(cls, name).__unittest_expecting_failure__ = True
        _ut.TestCase.__init_subclass__ = classmethod(_expect)
        """
    )
    return {
        "xfail_called_in_the_code": (TOOLZ, "pytest.xfail('not yet')"),
        "skip_called_in_the_code": (TOOLZ, "pytest.skip('later')"),
        "xfail_exception_raised": (TOOLZ, "raise pytest.xfail.Exception('known')"),
        "xfail_markers_added_at_collection": (SQLPARSE, pytest_plugin(XFAIL_MARKERS, f2p_names(SQLPARSE))),
        "unittest_expected_failure_set_at_run_time": (MORE_ITERTOOLS, unittest_expect),
    }


@pytest.mark.parametrize("route", sorted(outcome_routes()))
async def test_expected_failures_and_skips_from_the_code_do_not_pass(route, spec):
    row, code = outcome_routes()[route]
    if row is TOOLZ:  # called where the fix belongs: the branch the bug removed
        loop = "            for attr in qualname.split('.'):\n"
        source = (await prepare_repo(row) / row["mutation"]["file"]).read_text()
        assert loop in source
        branch = f"                if isinstance(obj, curry):\n                    import pytest\n                    {code}\n"
        files = {row["mutation"]["file"]: source.replace(loop, loop + branch, 1)}
    else:
        files = {module_under_test(row): code}
    result = await tamper(row, spec, files)
    assert_zero(result, "skipped", "marks no xfail", "a control of", "did not pass")


# ---------------------------------------------------------------------- 4. inside the test process


def forge_everything(row: dict) -> str:
    """Whatever the grader keeps in this process (a key, a report path, a stream): take it, and at exit write
    passes for every test asked for (a failure for the last one, a canary that must fail), then leave."""
    return textwrap.dedent(
        """

        def _forge():
            import atexit, gc, hashlib, hmac, json, os, sys
            args = [a for a in sys.argv[1:] if "::" in a]
            outcomes = {t: {"setup": "passed", "call": "passed", "teardown": "passed"} for t in args}
            if args:
                outcomes[args[-1]]["call"] = "failed"
            payload = json.dumps({"finished": True, "problems": [], "outcomes": outcomes}, sort_keys=True)
            watches = [o for o in gc.get_objects() if type(o).__name__ == "_Watch"]
            for fd in range(3, 64):
                try:
                    for t, phases in outcomes.items():
                        for when, outcome in phases.items():
                            event = {"e": "report", "id": t, "when": when, "outcome": outcome}
                            os.write(fd, ("@prorl " + json.dumps(event) + "\\n").encode())
                except OSError:
                    pass
            def finish():
                for w in watches:
                    sig = hmac.new(w.key, payload.encode(), hashlib.sha256).hexdigest()
                    with open(w.path, "w") as f:
                        f.write(json.dumps({"payload": payload, "signature": sig}))
                lines = [("FAILED " if p["call"] == "failed" else "PASSED ") + t for t, p in outcomes.items()]
                sys.stdout.write("=" * 20 + " short test summary info " + "=" * 20 + "\\n" + "\\n".join(lines) + "\\n")
                sys.stdout.flush()
                os._exit(0)
            atexit.register(finish)
        _forge()
        """
    )


def rewrite_unittest_state(row: dict) -> str:
    names = f2p_names(row)
    return textwrap.dedent(
        f"""

        def _rewrite():
            import sys, unittest
            main = sys.modules.get("__main__")
            class Always(dict):
                def __setitem__(self, key, value):
                    super().__setitem__(key, "passed" if key.rsplit(".", 1)[-1] in {names!r} else value)
            for name, value in list(vars(main).items()):
                if type(value) is dict:
                    setattr(main, name, Always(value))
            own = unittest.TestCase.__dict__["__init_subclass__"]
            def wrap(cls, **kw):
                own.__func__(cls, **kw)
                for name in {names!r}:
                    if name in vars(cls):
                        setattr(cls, name, lambda self: None)
            unittest.TestCase.__init_subclass__ = classmethod(wrap)
        _rewrite()
        """
    )


# The run sabotages what comes after it, to turn its 0 into an infrastructure failure (retried, never scored):
# it kills every process it can signal (the grader's shell among them), or fills the scratch space.
KILL_EVERYTHING = """
import os, signal
os.kill(-1, signal.SIGKILL)
"""
FILL_THE_DISK = """
import os
with open("/tmp/fill", "wb") as _f:
    try:
        while True:
            _f.write(bytes(1 << 20))
    except OSError:
        pass
"""
# A process left behind keeps appending to the failing tests' file while the run goes on and after it.
REWRITER = """
import subprocess as _subprocess, sys as _sys
_subprocess.Popen(
    [_sys.executable, "-c", "import time\\nfor _ in range(500):\\n    open(%r, 'a').write(chr(10))\\n    time.sleep(0.01)"],
    start_new_session=True,
)
"""


def in_process_routes() -> dict:
    toolz = TOOLZ
    return {
        # every test of the failing tests' files wrapped at collection
        "runtest_wrapped_by_file": (toolz, pytest_plugin(WRAP_RUNTEST, graded_files(toolz)), ("a control of",)),
        # only the failing tests, by name (as a policy that ran the suite would know them): renamed, they never meet
        "runtest_wrapped_by_name": (toolz, pytest_plugin(WRAP_RUNTEST, f2p_names(toolz)), ("did not pass",)),
        "runtest_wrapped_by_name_src_layout": (
            CACHETOOLS,
            pytest_plugin(WRAP_RUNTEST, f2p_names(CACHETOOLS)),
            ("did not pass",),
        ),
        # a report hook whose code object claims a standard-library file, the guard silenced
        "report_hook_with_a_stdlib_file_name": (
            toolz,
            trusted_name_hook(f2p_names(toolz)),
            ("did not pass", "reported passed"),
        ),
        "key_stolen_report_forged": (HUMANIZE, forge_everything(HUMANIZE), ()),
        "unittest_guard_state_rewritten": (
            MORE_ITERTOOLS,
            rewrite_unittest_state(MORE_ITERTOOLS),
            ("did not pass", "comes from", "a control of"),
        ),
        # sealed: the run can signal nothing outside itself (the kill hits its own children, never the grader)
        "every_process_killed": (
            toolz,
            KILL_EVERYTHING,
            ("did not pass", "did not complete", "ended the grader's shell"),
        ),
        "scratch_space_filled": (toolz, FILL_THE_DISK, ()),
        "test_file_rewritten_by_a_process_left_behind": (
            toolz,
            REWRITER % ("/workspace/" + graded_files(toolz)[0]),
            ("was written while the tests ran", "did not pass"),  # sealed, the repository is read-only
        ),
    }


@pytest.mark.parametrize("route", sorted(in_process_routes()))
async def test_tampering_inside_the_test_process_is_caught(route, spec):
    row, code, reasons = in_process_routes()[route]
    result = await tamper(row, spec, {module_under_test(row): code})
    assert_zero(result, *reasons)


# ---------------------------------------------------------------------- 5. what the agent can read


@pytest.fixture
def vendored_copy():
    """A read-only directory, as a system might have one, holding another copy of cachetools."""
    path = Path(tempfile.mkdtemp(prefix="prorl-vendored-", dir="/tmp"))
    for where in ("lib/third_party/cachetools", "lib/python3/dist-packages/cachetools"):
        (path / where).mkdir(parents=True)
        (path / where / "__init__.py").write_text("# the upstream cachetools, fixed\n")
    (path / "lib/python3/dist-packages/cachetools-9.9.9.dist-info").mkdir()
    (path / "lib/single/cachetools.py").parent.mkdir(parents=True)
    (path / "lib/single/cachetools.py").write_text("# another copy\n")
    for p in [path, *path.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# Every file under anything named like the package, anywhere but the agent's own repository (and /proc).
FIND_COPIES = (
    "find / -xdev \\( -path /proc -o -path /workspace -o -path /task/repo \\) -prune -o "
    "\\( -name cachetools -o -name 'cachetools*.py' -o -name 'cachetools-*' \\) -print0 2>/dev/null "
    "| xargs -0 -r -I{} find {} -type f -size +0 2>/dev/null; true"
)


async def test_the_agent_sees_no_other_copy_of_the_tasks_package(spec, vendored_copy):
    """A copy elsewhere in the sandbox's view of the system (here one the test binds in as a system would
    have it, and any the machine has: an SDK under /usr/lib vendors cachetools) is an empty placeholder."""
    row = CACHETOOLS
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    spec = spec.model_copy(update={"binds": [Bind(src=str(vendored_copy), dst="/opt/vendor")]})
    async with await create_sandbox(task_spec(spec, row, repo, env)) as sb:
        await stage_repo(sb, row)
        found = (await sb.bash(FIND_COPIES, timeout=120)).output.split()
        vendored = (await sb.bash("find /opt/vendor -type f -size +0")).output.split()
        own = (await sb.bash("python -c 'import cachetools; print(cachetools.__file__)'")).output
        listed = (await sb.bash("ls /task/repo/src/cachetools | head -3")).output.split()
    assert own.strip() == "/workspace/src/cachetools/__init__.py", own
    assert "__init__.py" in listed  # the task's own repository is shown as it is
    assert not vendored and not found, (vendored, found)


# ---------------------------------------------------------------------- 6. pytest configuration in any TOML syntax

# pytest imports pdb when it configures itself, after the ini's `pythonpath` took effect.
SHADOW = {"shadow/pdb.py": stdlib_stand_in("pdb", pytest_plugin(WRAP_RUNTEST, f2p_names(SQLPARSE)))}
CONFIG_ROUTES = {  # sqlparse's pyproject.toml has no pytest section: these add one without a [tool.pytest...] header
    "dotted_key_under_tool": lambda text: text + '\n[tool]\npytest.ini_options = {pythonpath = ["shadow"]}\n',
    "dotted_key_at_the_top": lambda text: 'tool.pytest.ini_options.pythonpath = ["shadow"]\n' + text,
    "inline_table": lambda text: (
        'tool = {pytest = {ini_options = {pythonpath = ["shadow"]}}}\n' + "[build-system]\nrequires = []\n"
    ),
}


@pytest.mark.parametrize("route", sorted(CONFIG_ROUTES))
async def test_pytest_configuration_in_any_syntax_is_reset(route, spec):
    row = SQLPARSE
    text = (await prepare_repo(row) / "pyproject.toml").read_text()
    assert "[tool.pytest" not in text
    result = await tamper(row, spec, SHADOW | {"pyproject.toml": CONFIG_ROUTES[route](text)})
    assert_zero(result, "pytest configuration")
