# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The seal a test run starts under (guard/prorl_seal.py), in a real sandbox: what the run then cannot do to
the grader (issue 37, classes E and G), seen from inside: each attempt says how it ended."""

from __future__ import annotations

import json

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.runners import GUARD_SOURCES

ATTEMPTS = r"""
import ctypes, fcntl, json, os, signal, sys
outcome = {}
def attempt(name, action):
    try:
        action()
        outcome[name] = "done"
    except OSError as exc:
        outcome[name] = type(exc).__name__
def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, os.getppid(), 0, 0) != 0:  # PTRACE_ATTACH to the grader's shell
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(17, os.getppid(), 0, 0)
attempt("write the repository", lambda: open("/workspace/test_x.py", "a").write("#"))
attempt("write scratch", lambda: open("/tmp/scratch", "w").write("x"))
attempt("signal the grader", lambda: os.kill(os.getppid(), 0))
attempt("signal pid 1", lambda: os.kill(1, 0))
attempt("ptrace the grader", ptrace)
attempt("read the grader's memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1))
attempt("open a terminal", lambda: os.open("/dev/tty", os.O_RDWR))
attempt("TIOCSTI on stdin", lambda: fcntl.ioctl(0, 0x5412, b"x"))
sys.stdout.write(json.dumps(outcome) + "\n")
"""


async def test_a_sealed_run_cannot_touch_the_grader(sandbox_root):
    async with await create_sandbox(SandboxSpec(root_dir=sandbox_root)) as sb:
        await sb.write_file("/tmp/g/prorl_seal.py", (GUARD_SOURCES / "prorl_seal.py").read_text())
        await sb.write_file("/tmp/g/attempts.py", ATTEMPTS)
        await sb.write_file("/workspace/test_x.py", "def test_x():\n    pass\n")
        abi = int((await sb.bash("python -I -B /tmp/g/prorl_seal.py --probe")).output.strip())
        if abi < 6:
            pytest.skip(f"this kernel's Landlock ABI is {abi}: the seal needs 6 for signal scoping")
        run = await sb.bash(
            "cd /workspace && python -I -B /tmp/g/prorl_seal.py --events-fd 3 --write /tmp -- "
            "python -I /tmp/g/attempts.py 3>/tmp/events </dev/null; cat /tmp/events"
        )
    outcome_line, event_line = run.output.strip().splitlines()[:2]
    # here the seal leads its process group (no `timeout` above it): no session of its own, the terminal let go
    assert json.loads(event_line.removeprefix("@prorl ")) == {
        "e": "sealed",
        "abi": abi,
        "session": False,
        "tty": False,
    }
    assert json.loads(outcome_line) == {
        "write the repository": "PermissionError",
        "write scratch": "done",
        "signal the grader": "PermissionError",
        "signal pid 1": "PermissionError",
        "ptrace the grader": "PermissionError",
        "read the grader's memory": "PermissionError",
        "open a terminal": "PermissionError",  # none left, and /dev/tty is not writable sealed
        "TIOCSTI on stdin": "OSError",  # /dev/null is no terminal; the grader's is out of reach
    }
