# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SymPy's own test runner as SWE grading runs it, narrating what happens to the grader.

    python -I -B -u prorl_sympy_guard.py --events-fd 3 [--path DIR]... [--env-path DIR]... [--changed FILE]...
        -- <test file>...

Runs the files with the repository's `sympy.testing.runtests` as SWE-bench's `bin/test -C --verbose
<files>` does (no cache, verbose lines `test_x ok|F|E`, files and tests in order, warnings of the
spec's PYTHONWARNINGS ignored), in this isolated interpreter rather than a subprocess of it (hash
randomisation is on all the same: -I ignores PYTHONHASHSEED): the task's environment and the
repository's import roots are appended to sys.path after the interpreter's own directories. Its
reporter says, on fd 3 as it happens (`@prorl {json}`): each test as it starts (`file::name`, with the
file its code comes from), each outcome, the runner's own functions replaced, the end. The runner is
the repository's own code (sympy/testing/, which a patch may not change: the grader resets it); the
grader outside decides; nothing here is secret (see prorl_pytest_guard.py). --changed is accepted for
the runners' common command line.

Standard library only, until the repository's SymPy is imported.
"""

import builtins
import inspect
import json
import os
import sys
import warnings


def _args(argv):
    opts = {"--events-fd": [], "--path": [], "--env-path": [], "--changed": []}
    i = 0
    while i < len(argv) and argv[i] != "--":
        opts[argv[i]].append(argv[i + 1])
        i += 2
    return int(opts["--events-fd"][0]), opts["--path"], opts["--env-path"], argv[i + 1 :]


EVENTS_FD, REPO_PATHS, ENV_PATHS, FILES = _args(sys.argv[1:])
os.set_inheritable(EVENTS_FD, False)
ROOT = os.path.realpath(REPO_PATHS[0] if REPO_PATHS else os.getcwd())


def emit(**event):
    try:
        os.write(EVENTS_FD, ("@prorl " + json.dumps(event, sort_keys=True) + "\n").encode())
    except (OSError, TypeError, ValueError):
        pass


def _real(path):
    return os.path.realpath(path) if path else None


emit(e="start", runner="sympy", trusted=sorted({_real(p) for p in [sys.prefix, sys.base_prefix, *ENV_PATHS]}))
os.environ["SYMPY_USE_CACHE"] = "no"  # bin/test -C, read when SymPy is imported
for category in (UserWarning, SyntaxWarning):  # the spec's PYTHONWARNINGS (-I ignores the variable)
    warnings.filterwarnings("ignore", category=category)


def _static(owner, name):
    return owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)


_reported = set()
WATCHED = []


def check(where):
    for owner, name, original in WATCHED:
        if _static(owner, name) is not original:
            text = "{}.{} was replaced ({})".format(getattr(owner, "__name__", owner), name, where)
            if text not in _reported:
                _reported.add(text)
                emit(e="problem", text=text)


def guard(runtests):
    """The reporter of the repository's runner, narrating; its machinery watched from here on."""
    reporter = runtests.PyTestReporter
    current = {}

    def wrap(name, outcome=None, xfail=False):
        original = reporter.__dict__[name]

        def hooked(self, *args, **kwargs):
            if name == "entering_filename":
                current["file"] = os.path.relpath(os.path.realpath(args[0]), ROOT)
            elif name == "entering_test":
                function = args[0]
                current["id"] = "{}::{}".format(current.get("file"), getattr(function, "__name__", "?"))
                code = None
                try:
                    code = inspect.getsourcefile(inspect.unwrap(function))
                except (TypeError, ValueError):
                    pass
                check("starting " + current["id"])
                emit(e="item", id=current["id"], module=_real(os.path.join(ROOT, current["file"])), code=_real(code))
            else:
                check("reporting " + str(current.get("id")))
                emit(e="report", id=current.get("id"), when="call", outcome=outcome, xfail=xfail)
            return original(self, *args, **kwargs)

        setattr(reporter, name, hooked)

    wrap("entering_filename")
    wrap("entering_test")
    wrap("test_pass", "passed")
    wrap("test_fail", "failed")
    wrap("test_exception", "failed")
    wrap("test_skip", "skipped")
    wrap("test_xfail", "skipped", xfail=True)
    wrap("test_xpass", "failed")
    hooks = ("entering_filename", "entering_test", "test_pass", "test_fail", "test_exception", "test_skip")
    WATCHED.extend((reporter, name, reporter.__dict__[name]) for name in (*hooks, "test_xfail", "test_xpass"))
    WATCHED.extend(
        (owner, name, _static(owner, name))
        for owner, name in (
            (runtests.SymPyTests, "test_file"),
            (runtests.SymPyTests, "test"),
            (runtests, "_test"),
            (builtins, "AssertionError"),
            (os, "_exit"),
            (sys.modules[__name__], "emit"),
        )
    )


def main():
    sys.path.extend(ENV_PATHS)
    sys.path[len(sys.path) - len(ENV_PATHS) : len(sys.path) - len(ENV_PATHS)] = REPO_PATHS
    import sympy.testing.runtests as runtests  # the repository's code is imported here

    guard(runtests)
    failed = runtests._test(*FILES, verbose=True, sort=True)
    check("at the end")
    emit(e="end", status=int(bool(failed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
