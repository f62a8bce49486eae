# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`make eval` against a real endpoint that dies mid-run: the policy check passes, the endpoint (the
scripted policy answering as vLLM, 400 ms an answer) is killed once rollouts hold sandboxes, and with
--policy-grace-s 3 the terminal says POLICY DOWN as it happens, the rollouts end typed policy_down (none
waits out retry.recovery_timeout_s, 600 s), and the command ends with exit 1, its last line saying why."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import free_port, stop_session

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"


@pytest.mark.timeout(900)
def test_a_policy_that_dies_mid_run_is_said_on_the_terminal_and_fails_the_command(tmp_path, sandbox_root):
    sandbox_root, port = Path(sandbox_root), free_port()
    argv = [sys.executable, "-m", "responses_api_models.scripted_policy", "--data", str(EXAMPLE), "--port", str(port)]
    with open(tmp_path / "policy.log", "w") as out:
        policy = subprocess.Popen(
            [*argv, "--latency-ms", "400"], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                assert policy.poll() is None, (tmp_path / "policy.log").read_text()
                time.sleep(0.1)
        out = tmp_path / "eval"
        argv = [sys.executable, "-m", "prorl_gym.evaluation", "--env", "math", "--split", "example", "--repeats", "4"]
        argv += ["--policy-base-url", f"http://127.0.0.1:{port}/v1", "--policy-model", "scripted-gold"]
        argv += ["--policy-grace-s", "3", "--sandbox-root", str(sandbox_root), "--out", str(out)]
        log = tmp_path / "eval.log"
        with open(log, "w") as stderr:
            evaluation = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        while not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")]:  # mid-collection
            assert evaluation.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        os.killpg(policy.pid, signal.SIGKILL)  # the GPU server dies for good
        evaluation.wait(timeout=600)
    finally:
        stop_session(policy)
    said = log.read_text()
    assert "[eval] policy check: " in said and "gives token ids" in said  # it was there at the start
    assert evaluation.returncode == 1, said[-3000:]
    assert "[eval] POLICY DOWN: no policy endpoint has been healthy for" in said
    assert said.strip().splitlines()[-1].startswith("FAILED: the policy was down: ")
    failures = read_jsonl(out / "rollouts_failures.jsonl")
    assert failures and all(r["failure"]["type"] == "policy_down" for r in failures)
    assert len(failures) + len(read_jsonl(out / "rollouts.jsonl", missing_ok=True)) == 20
