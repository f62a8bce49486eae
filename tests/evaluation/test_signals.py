# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SIGTERM in the middle of `make eval`'s collection (as `timeout`, `kill`, a CI runner or a scheduler
sends it) stops everything the command started, as Ctrl-C does: the policy, the stack's Ray, ng_run
and every server, ng_collect_rollouts, every sandbox. A second SIGTERM during the teardown is said and
does not abort it. Real stack, real signals; processes found by what they carry (the run's own journal
directory in their environment; the run's sandbox root in a sandbox's command line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prorl_gym.paths import REPO_ROOT


def started_by(marker: str) -> dict[int, bytes]:
    """{pid: its /proc stat start time} of every process with `marker` in its environment or command line
    (the machine's server zygote aside: it serves every stack on the machine and exits when idle)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                start = f.read().rsplit(b")", 1)[1].split()[19]
        except OSError:
            continue
        if b"prorl_gym.server_zygote" in cmdline or int(entry.name) == os.getpid():
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found[int(entry.name)] = start
    return found


def alive(processes: dict[int, bytes]) -> list[int]:
    return [pid for pid, start in processes.items() if started_by_pid(pid) == start]


def started_by_pid(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19]
    except OSError:
        return None


def sandboxes(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if not p.name.startswith(".")]


@pytest.mark.timeout(900)
def test_sigterm_mid_collection_stops_every_process_and_sandbox(tmp_path, sandbox_root):
    sandbox_root, out = Path(sandbox_root), tmp_path / "eval"
    argv = [sys.executable, "-m", "prorl_gym.evaluation", "--env", "math", "--split", "example", "--repeats", "8"]
    argv += ["--scripted-latency-ms", "400", "--sandbox-root", str(sandbox_root), "--out", str(out)]
    log = tmp_path / "eval.log"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=dict(os.environ, PYTHONUNBUFFERED="1")
        )
    journal = str(out / "logs" / "journal")  # in the environment of every process the stack starts
    try:
        deadline = time.monotonic() + 600
        while not sandboxes(sandbox_root):  # mid-collection: rollouts hold sandboxes
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        stack, in_sandboxes = started_by(journal), started_by(str(sandbox_root))
        assert len(stack) > 5 and in_sandboxes, (stack, in_sandboxes)  # policy, Ray, ng_run, servers, collector
        proc.send_signal(signal.SIGTERM)
        while "[stack] stopping" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # a second one, during the teardown
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    said = log.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, said[-3000:]
    assert "stopped (SIGTERM); everything the command started was stopped" in said
    assert "SIGTERM: already stopping" in said  # the second one, said and ignored
    assert not alive(stack), [Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in alive(stack)]
    assert not alive(in_sandboxes) and not started_by(str(sandbox_root)) and not started_by(journal)
    leases = sandbox_root / ".leases"
    assert not sandboxes(sandbox_root) and not (list(leases.iterdir()) if leases.exists() else [])
