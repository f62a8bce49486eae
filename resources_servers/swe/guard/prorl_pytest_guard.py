# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A pytest plugin that watches the runner on behalf of the grader (SWE EVAL, inside the sandbox).

Loaded with `-p prorl_pytest_guard` from a directory first on sys.path, so it is imported before
any code of the repository under test. It remembers the runner's own functions (how a test is
called, how its outcome is made into a report and logged, how hooks are dispatched) and checks
they are still the same ones after collection, at every report and at the end; it refuses hook
implementations that live in the repository's code (only pytest, installed plugins and the
repository's conftest files, reset to their base versions by the grader, may implement the
hooks that decide outcomes); it derives each test's outcome itself from the call's exception
and compares it with the report. What it saw goes to a report signed with a key it read from an
inherited fd and closed before the repository's code ran. A run that never reaches the end
(os._exit, a crash) leaves no report: the grader then has no proof the tests ran.

Stdlib and pytest only: it runs on the sandbox's Python.
"""

import builtins
import hashlib
import hmac
import json
import os
import sys
import sysconfig

import _pytest.main
import _pytest.python
import _pytest.reports
import _pytest.runner
import _pytest.terminal
import pluggy._callers
import pluggy._hooks
import pluggy._manager
import pytest

OUTCOME_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_pyfunc_call",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
    "pytest_runtestloop",
)


def _static(owner, name):
    return owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)


WATCHED = [
    (owner, name, _static(owner, name))
    for owner, name in (
        (_pytest.python.Function, "runtest"),
        (_pytest.python, "pytest_pyfunc_call"),
        (_pytest.runner, "call_and_report"),
        (_pytest.runner, "runtestprotocol"),
        (_pytest.runner, "pytest_runtest_protocol"),
        (_pytest.runner, "pytest_runtest_makereport"),
        (_pytest.runner.CallInfo, "from_call"),
        (_pytest.reports.TestReport, "from_item_and_call"),
        (_pytest.reports.BaseReport, "passed"),
        (_pytest.reports.BaseReport, "failed"),
        (_pytest.main, "pytest_runtestloop"),
        (_pytest.terminal.TerminalReporter, "pytest_runtest_logreport"),
        (pluggy._callers, "_multicall"),
        (pluggy._hooks.HookCaller, "__call__"),
        (pluggy._manager.PluginManager, "_hookexec"),
        (builtins, "AssertionError"),
        (os, "_exit"),
    )
]


class _Watch:
    def __init__(self, key: bytes, path: str):
        self.key, self.path = key, path
        self.problems: list[str] = []
        self.outcomes: dict[str, dict[str, str]] = {}
        self.inner_hookexec = None
        self.config = None

    def check(self, where: str) -> None:
        for owner, name, original in WATCHED:
            if _static(owner, name) is not original:
                self.problem(f"{getattr(owner, '__name__', owner)}.{name} was replaced ({where})")
        pm = self.config.pluginmanager if self.config else None
        if pm is not None and pm._inner_hookexec is not self.inner_hookexec:
            self.problem(f"the plugin manager's hook executor was replaced ({where})")

    def problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    def hook_owners(self) -> None:
        """Hooks that decide outcomes may be implemented by code the sandbox cannot write (pytest, the
        Python install, read-only environments), this guard, and the repository's conftest files as
        the grader left them; by nothing else (the repository's modules, files written at run time)."""
        for name in OUTCOME_HOOKS:
            for impl in getattr(self.config.hook, name).get_hookimpls():
                source = getattr(getattr(impl.function, "__code__", None), "co_filename", "") or ""
                trusted = source == __file__ or source in CONFTESTS or source.startswith(TRUSTED)
                if not trusted:
                    self.problem(f"{name} is implemented by {source or impl.plugin_name!r}")

    def record(self, nodeid: str, when: str, outcome: str) -> None:
        self.outcomes.setdefault(nodeid, {})[when] = outcome

    def write(self) -> None:
        payload = json.dumps({"finished": True, "problems": self.problems, "outcomes": self.outcomes}, sort_keys=True)
        signature = hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()
        with open(self.path, "w") as f:
            f.write(json.dumps({"payload": payload, "signature": signature}))


def _read_key() -> bytes:
    fd = int(os.environ.pop("PRORL_GUARD_KEY_FD"))
    try:
        return os.read(fd, 128).strip()
    finally:
        os.close(fd)


_watch = _Watch(_read_key(), os.environ.pop("PRORL_GUARD_REPORT"))
del _read_key
# Read-only places whose code may implement outcome hooks: the interpreter's install and
# site-packages, and the task's test environment (PRORL_GUARD_TRUSTED, colon-separated).
TRUSTED = tuple(
    p
    for p in {sys.base_prefix, sys.prefix, *(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib"))}
    | set(filter(None, os.environ.pop("PRORL_GUARD_TRUSTED", "").split(":")))
    if p
)
CONFTESTS = frozenset(filter(None, os.environ.pop("PRORL_GUARD_CONFTESTS", "").split(":")))


def pytest_configure(config):
    _watch.config = config
    _watch.inner_hookexec = config.pluginmanager._inner_hookexec


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    _watch.check("after collection")
    _watch.hook_owners()
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    _watch.check(f"reporting {item.nodeid}")
    raised = call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
    if raised and report.outcome == "passed" and not hasattr(report, "wasxfail"):
        _watch.problem(f"{item.nodeid} raised {call.excinfo.typename} in {call.when} but was reported passed")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    outcome = "xfail" if report.outcome == "skipped" and hasattr(report, "wasxfail") else report.outcome
    _watch.record(report.nodeid, report.when, outcome)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _watch.check("at the end")
    _watch.write()
