# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""pytest as SWE grading runs it, narrating what happens to the grader (SWE EVAL, inside the sandbox).

    python -I -B -u prorl_pytest_guard.py --events-fd 3 [--path DIR]... [--env-path DIR]... [--changed FILE]...
        -- <node id>...

The interpreter is isolated (-I): sys.path holds its own directories only, PYTHON* variables and user
site-packages are ignored. The task's environment (--env-path, read-only) and then the repository's
import roots (--path) are appended after them, and test modules are imported with
--import-mode=append: nothing the repository holds can stand in for a module of the standard
library, of the runner or of the installed packages. Plugins come from the installed entry points,
read before the repository is on sys.path (a plugin the repository's own metadata declares is never
loaded: autoloading is off). Whether an installed package shadows the tests' own is the grader's
question, answered before the run (a message from inside the run never makes a task ungradeable).
--changed: the files of the code under test the patch changed; code from them implementing the hooks
that decide a test's outcome is reported.

Each event goes to fd 3 the moment it happens, one line each (`@prorl {json}`): the items collected
(with the file each test's code really comes from), every report, what the runner's own functions
look like, the end. The grader outside the sandbox decides the grade from them, its canaries and the
runner's own summary. Nothing here is secret and nothing here decides: code under test shares this
process and can make it say false things, which is what the canaries are for.

Standard library and pytest only (it runs on the sandbox's Python, possibly an old one).
"""

import builtins
import inspect
import json
import os
import sys


def _args(argv):
    opts = {"--events-fd": [], "--path": [], "--env-path": [], "--changed": []}
    i = 0
    while i < len(argv) and argv[i] != "--":
        opts[argv[i]].append(argv[i + 1])
        i += 2
    return int(opts["--events-fd"][0]), opts["--path"], opts["--env-path"], set(opts["--changed"]), argv[i + 1 :]


EVENTS_FD, REPO_PATHS, ENV_PATHS, CHANGED, IDS = _args(sys.argv[1:])
os.set_inheritable(EVENTS_FD, False)  # the tests' subprocesses do not speak for this run


def emit(**event):
    try:
        os.write(EVENTS_FD, ("@prorl " + json.dumps(event, sort_keys=True) + "\n").encode())
    except (OSError, TypeError, ValueError):
        pass


def _real(path):
    return os.path.realpath(path) if path else None


emit(e="start", runner="pytest", trusted=sorted({_real(p) for p in [sys.prefix, sys.base_prefix, *ENV_PATHS]}))
sys.path.extend(ENV_PATHS)

import _pytest.main  # noqa: E402
import _pytest.python  # noqa: E402
import _pytest.reports  # noqa: E402
import _pytest.runner  # noqa: E402
import pluggy  # noqa: E402
import pytest  # noqa: E402


def _static(owner, name):
    return owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name, None)


# The runner's own functions: replaced later means someone in this process rewrote the runner.
WATCHED = [
    (owner, name, _static(owner, name))
    for owner, name in (
        (_pytest.python.Function, "runtest"),
        (_pytest.python, "pytest_pyfunc_call"),
        (_pytest.python.Function, "setup"),
        (_pytest.runner, "call_and_report"),
        (_pytest.runner, "call_runtest_hook"),
        (_pytest.runner, "runtestprotocol"),
        (_pytest.runner, "pytest_runtest_call"),
        (_pytest.runner.CallInfo, "from_call"),
        (_pytest.reports.TestReport, "from_item_and_call"),
        (_pytest.reports.BaseReport, "passed"),
        (_pytest.reports.BaseReport, "failed"),
        (_pytest.main, "pytest_runtestloop"),
        (pluggy.HookCaller if hasattr(pluggy, "HookCaller") else pluggy.PluginManager, "__call__"),
        (pluggy.PluginManager, "_hookexec"),
        (builtins, "AssertionError"),
        (os, "_exit"),
        (sys.modules[__name__], "emit"),
    )
    if (isinstance(owner, type) and name in owner.__dict__) or (not isinstance(owner, type) and hasattr(owner, name))
]
# Hooks that decide a test's outcome: an implementation in a file of the code under test the patch changed
# is reported (a project that is itself a pytest plugin and whose fix changes such a hook would be too).
RUNTEST_HOOKS = (
    "pytest_pyfunc_call",
    "pytest_runtest_call",
    "pytest_runtest_protocol",
    "pytest_runtest_makereport",
    "pytest_report_teststatus",
)
_reported = set()


def problem(text):
    if text not in _reported:
        _reported.add(text)
        emit(e="problem", text=text)


def check(where, config=None):
    for owner, name, original in WATCHED:
        if _static(owner, name) is not original:
            problem("{}.{} was replaced ({})".format(getattr(owner, "__name__", owner), name, where))
    if config is None:
        return
    for hook in RUNTEST_HOOKS:
        caller = getattr(config.pluginmanager.hook, hook, None)
        for impl in caller.get_hookimpls() if caller is not None else []:
            if _from_changed(impl.function):
                problem(f"the patch's code implements pytest's {hook} ({where})")


def _from_changed(function):
    """Whether a function's code comes from a file of the code under test that the patch changed."""
    if not CHANGED:
        return False
    try:
        code = inspect.unwrap(function).__code__
    except (AttributeError, TypeError, ValueError):
        return False
    return _real(code.co_filename) in CHANGED


def installed_plugins():
    """The pytest11 entry points of what is installed (the repository is not on sys.path yet)."""
    try:
        from importlib.metadata import entry_points
    except ImportError:  # Python < 3.8
        return None
    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    plugins = []
    for ep in group:
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken installed plugin is the environment's problem
            emit(e="note", text=f"plugin {ep.name} did not load: {exc!r}")
            continue
        if all(plugin is not p for p in plugins):
            plugins.append(plugin)
    return plugins


def pytest_collection_finish(session):
    check("after collection", session.config)
    for item in session.items:
        module = getattr(getattr(item, "module", None), "__file__", None)
        code = None
        function = getattr(item, "obj", None)
        try:
            code = inspect.unwrap(function).__code__.co_filename
        except (AttributeError, TypeError, ValueError):
            pass
        emit(e="item", id=item.nodeid, module=_real(module), code=_real(code))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    check(f"reporting {item.nodeid}")
    raised = call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
    if raised and report.outcome == "passed" and not hasattr(report, "wasxfail"):
        emit(
            e="problem",
            text=f"{item.nodeid} raised {call.excinfo.typename} in {call.when} but was reported passed",
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    # A subtest's report (pytest 9: unittest's subTest and the subtests fixture) is one of several for its test.
    sub = type(report).__name__ == "SubtestReport" or hasattr(report, "context")
    emit(
        e="report",
        id=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        xfail=hasattr(report, "wasxfail"),
        sub=sub,
    )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    check("at the end", session.config)
    emit(e="end", status=int(exitstatus))


def main():
    plugins = installed_plugins()
    if plugins is not None:
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.path[len(sys.path) - len(ENV_PATHS) : len(sys.path) - len(ENV_PATHS)] = REPO_PATHS  # the repository first
    major = int(pytest.__version__.split(".")[0])
    args = ["-p", "no:cacheprovider", "-o", "addopts=", "-rA", "--tb=short"]
    if major >= 6:
        args.append("--import-mode=append")
    return pytest.main(args + IDS, plugins=[*(plugins or []), sys.modules[__name__]])


if __name__ == "__main__":
    sys.exit(main())
