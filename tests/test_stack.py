# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Stack's start on a busy machine: an ng_run whose Ray cluster did not come up is started again,
another failure is said at once; the lean Ray cluster a stack starts for ng_run. (Every end-to-end test starts a real Stack; here a stand-in
ng_run fails on demand, as Ray's node registration does under load: 2 of 9 starts on a busy
machine.)"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from prorl_gym.runtime.process import session_members
from prorl_gym.stack import BIN, Stack, StackError, lean_ray_cluster

# Says what the real ng_run says when ray.init's node misses Ray's 30 s, the first $FAILS times.
FAKE_NG_RUN = """#!/bin/sh
echo "ng_run $*"
n=$(cat "$STATE" 2>/dev/null || echo 0)
echo $((n + 1)) > "$STATE"
if [ "$n" -lt "$FAILS" ]; then
  echo "NeMo Gym is starting a new Ray cluster..."
  echo "$FAILURE"
  exit 1
fi
echo "All 3 / 3 servers ready!"
exec sleep 600
"""
RAY_TIMEOUT = "Exception: The current node timed out during startup. This could happen because ..."


@pytest.fixture
def fake_ng_run(tmp_path, monkeypatch):
    script = tmp_path / "ng_run"
    script.write_text(FAKE_NG_RUN)
    script.chmod(0o755)
    monkeypatch.setenv("STATE", str(tmp_path / "starts"))
    monkeypatch.setenv("FAILURE", RAY_TIMEOUT)
    return script


def stack(tmp_path, script, lean_ray: bool = False, ray=None, logs: str = "logs") -> Stack:
    return Stack(
        ["configs/math.yaml"],
        log_dir=tmp_path / logs,
        start_command=[str(script)],
        ready_timeout_s=60,
        lean_ray=lean_ray,
        ray=ray,
    )


def starts(tmp_path) -> int:
    return int((tmp_path / "starts").read_text())


def test_a_ray_cluster_that_did_not_start_is_started_again(tmp_path, fake_ng_run, monkeypatch, capfd):
    monkeypatch.setenv("FAILS", "2")
    with stack(tmp_path, fake_ng_run):
        assert starts(tmp_path) == 3
    assert "attempt 2 of 3" in capfd.readouterr().err
    kept = sorted(p.name for p in (tmp_path / "logs").glob("ng_run*.log"))
    assert kept == ["ng_run.attempt1.log", "ng_run.attempt2.log", "ng_run.log"]
    assert "timed out during startup" in (tmp_path / "logs" / "ng_run.attempt1.log").read_text()


def test_it_gives_up_after_its_attempts_saying_why(tmp_path, fake_ng_run, monkeypatch):
    monkeypatch.setenv("FAILS", "9")
    with pytest.raises(StackError) as exc, stack(tmp_path, fake_ng_run):
        pass
    assert "did not start in 3 attempts" in str(exc.value) and "ng_run.attempt3.log" in str(exc.value)
    assert starts(tmp_path) == 3


def test_any_other_failure_is_said_at_once(tmp_path, fake_ng_run, monkeypatch):
    monkeypatch.setenv("FAILS", "9")
    monkeypatch.setenv("FAILURE", "omegaconf.errors.ConfigKeyError: Missing key policy_base_url")
    with pytest.raises(StackError) as exc, stack(tmp_path, fake_ng_run):
        pass
    assert "exited with 1" in str(exc.value) and "Missing key policy_base_url" in str(exc.value)
    assert starts(tmp_path) == 1


JOIN = """
import ray
ray.init(address="{address}", log_to_driver=False)
print("joined", len(ray.nodes()))
"""


def test_a_stack_hands_ng_run_a_lean_ray_that_goes_with_it(tmp_path, fake_ng_run, monkeypatch):
    monkeypatch.setenv("FAILS", "0")
    with stack(tmp_path, fake_ng_run, lean_ray=True) as running:
        head = running._procs[0]
        address = json.loads((tmp_path / "logs" / "ray_address").read_text())["address"]
        said = (tmp_path / "logs" / "ng_run.log").read_text()
        assert f" +ray_head_node_address={address}" in said  # ng_run joins it instead of starting one
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in session_members(head.pid)]
        assert any(b"gcs_server" in c for c in commands) and any(b"raylet" in c for c in commands)
        assert not any(b"ray::IDLE" in c or b"ray-dashboard-" in c for c in commands)  # the lean part
        # A process started as the stack starts its CLIs joins it (token authentication included).
        joined = subprocess.run(
            [str(BIN / "python"), "-c", JOIN.format(address=address)],
            env=running.environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert joined.stdout.strip() == "joined 1", joined.stderr[-2000:]
    assert session_members(head.pid) == []  # nothing of it is left


def test_stacks_in_turn_join_one_lean_ray_that_outlives_them(tmp_path, fake_ng_run, monkeypatch):
    monkeypatch.setenv("FAILS", "0")
    with lean_ray_cluster(tmp_path / "ray") as cluster:
        for name in ("first", "second"):
            with stack(tmp_path, fake_ng_run, ray=cluster, logs=name) as running:
                said = (tmp_path / name / "ng_run.log").read_text()
                assert f" +ray_head_node_address={cluster.address}" in said
                assert not (tmp_path / name / "ray_address").exists()  # it started no cluster of its own
                assert running.environment().items() >= cluster.env.items()
            joined = subprocess.run(
                [str(BIN / "python"), "-c", JOIN.format(address=cluster.address)],
                env=running.environment(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert joined.stdout.strip() == "joined 1", joined.stderr[-2000:]  # still up once the stack is gone
    host, port = cluster.address.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port)), timeout=10):
        pass  # and down once the block ends


def test_a_policy_already_dead_is_restarted_without_killing_it_again(tmp_path, monkeypatch):
    # The test before left the policy dead, its process group gone: killing it again raised ESRCH.
    dead = subprocess.Popen(["true"], start_new_session=True)
    dead.wait()
    s = stack(tmp_path, tmp_path / "unused")
    s._procs.append(dead)
    started = subprocess.Popen(["sleep", "30"], start_new_session=True)
    monkeypatch.setattr(Stack, "_start_policy", lambda self: self._procs.append(started) or started)
    try:
        s.restart_policy()
        assert s._procs == [started]
    finally:
        started.kill()
        started.wait()
