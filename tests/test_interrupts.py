# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Stop signals of the commands that start stacks (prorl_gym/interrupts.py, run_cli): SIGTERM, SIGHUP
and Ctrl-C each run the command's teardown, a second signal during it is said and never aborts it, an
ignored SIGHUP (nohup) stays ignored, and a command run by make stops when make is killed (make does
not pass SIGTERM on). Real processes, real signals; the teardown here stands for a Stack's (a real
stack is stopped by SIGTERM in tests/evaluation/test_signals.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prorl_gym.paths import REPO_ROOT

# A command under run_cli whose teardown takes a while and leaves a file when it has run to its end.
COMMAND = """
import sys, time
from pathlib import Path
from prorl_gym.stack import run_cli

def main():
    try:
        print("ready", flush=True)
        time.sleep(120)
    finally:
        print("tearing down", flush=True)
        time.sleep(1.5)
        Path(sys.argv[1]).write_text("torn down")
    return 0

run_cli(main)
"""


def start(tmp_path: Path, sighup=signal.SIG_DFL) -> subprocess.Popen:
    """The command, with SIGHUP as `sighup` when it starts: the default unless a test says otherwise, whatever
    the suite itself was started under (`nohup make test` hands every child an ignored SIGHUP)."""
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    argv = [sys.executable, str(script), str(tmp_path / "done")]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, sighup),
    )


def expect_line(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdout.readline().strip() == line, proc.stderr.read() if proc.poll() is not None else ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_runs_the_teardown_and_a_second_does_not_abort_it(tmp_path, sig):
    proc = start(tmp_path)
    expect_line(proc, "ready")
    proc.send_signal(sig)
    expect_line(proc, "tearing down")
    proc.send_signal(sig)  # a second Ctrl-C, a scheduler's repeated SIGTERM
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert (tmp_path / "done").read_text() == "torn down"
    assert "already stopping" in err and f"stopped ({signal.Signals(sig).name})" in err


def test_an_ignored_sighup_stays_ignored(tmp_path):
    """`nohup make eval ...`: the terminal going away must not stop it."""
    proc = start(tmp_path, sighup=signal.SIG_IGN)
    expect_line(proc, "ready")
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGTERM)  # pending together, SIGHUP (1) would be handled first
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM and "stopped (SIGTERM)" in err, err
    assert "already stopping" not in err and (tmp_path / "done").read_text() == "torn down"


def test_a_command_run_by_make_stops_when_make_is_killed(tmp_path):
    """GNU make does not pass SIGTERM on to its recipe: the command follows make out instead."""
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"run:\n\t{sys.executable} {script} {tmp_path / 'done'}\n")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    make = subprocess.Popen(
        ["make", "-s", "-f", str(makefile), "run"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    assert make.stdout.readline().strip() == "ready"
    make.send_signal(signal.SIGTERM)  # make alone: `kill <make's pid>`
    make.wait(timeout=30)
    deadline = time.monotonic() + 30
    while not (tmp_path / "done").exists():
        assert time.monotonic() < deadline, "the command went on after make was killed"
        time.sleep(0.1)
    assert (tmp_path / "done").read_text() == "torn down"
