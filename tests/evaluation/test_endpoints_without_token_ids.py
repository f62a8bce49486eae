# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Evaluating an endpoint that is not vLLM (a hosted API, llama.cpp, Ollama) through the real command:
the scripted policy answering as such a server does (--plain: chat completions only, no log-probs, no
token ids, no /models, no /tokenize), on a real stack.

With --no-token-ids every rollout works and its record says it carries no ids. Without it, the check
before the stack starts refuses the endpoint, naming the switch (exit 2, nothing started); and with
that check skipped, each rollout fails once (never retried: the endpoint cannot change its mind), typed
policy_incompatible, with an error naming the switch, and the command exits 1 saying why on its last
line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import free_port, stop_session

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"


@pytest.fixture(scope="module")
def plain_endpoint(tmp_path_factory):
    port = free_port()
    argv = [sys.executable, "-m", "responses_api_models.scripted_policy", "--data", str(EXAMPLE), "--port", str(port)]
    log = tmp_path_factory.mktemp("plain") / "policy.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*argv, "--plain"], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/v1"
    stop_session(proc)


def evaluate(url: str, out, sandbox_root: str, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "prorl_gym.evaluation", "--env", "math", "--split", "example", "--limit", "2"]
    argv += ["--repeats", "1", "--policy-base-url", url, "--policy-model", "scripted-gold"]
    argv += ["--sandbox-root", sandbox_root, "--out", str(out), *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)


def test_no_token_ids_evaluates_and_says_so(plain_endpoint, tmp_path, sandbox_root):
    run = evaluate(plain_endpoint, tmp_path / "eval", sandbox_root, "--no-token-ids")
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    records = read_jsonl(tmp_path / "eval" / "rollouts.jsonl")
    assert [r["reward"] for r in records] == [1.0, 1.0]
    assert all(r["token_ids"] is False and r["token_ids_contiguous"] is None for r in records)
    assert "none in 2 rollouts" in (tmp_path / "eval" / "report.md").read_text()


def test_token_ids_from_such_an_endpoint_are_refused_before_anything_starts(plain_endpoint, tmp_path, sandbox_root):
    run = evaluate(plain_endpoint, tmp_path / "eval", sandbox_root)
    assert run.returncode == 2, run.stderr
    assert "no per-token log-probs with token ids" in run.stderr and "TOKEN_IDS=0" in run.stderr
    assert "nothing was started" in run.stderr and not (tmp_path / "eval" / "logs").exists()


def test_token_ids_from_such_an_endpoint_fail_once_typed_and_the_command_says_so(
    plain_endpoint, tmp_path, sandbox_root
):
    run = evaluate(plain_endpoint, tmp_path / "eval", sandbox_root, "--no-policy-check")
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("FAILED: 2 of 2 rollouts failed (policy_incompatible)")
    failures = read_jsonl(tmp_path / "eval" / "rollouts_failures.jsonl")
    assert len(failures) == 2
    for record in failures:
        assert record["failure"]["type"] == "policy_incompatible" and record["failure"]["infra"] is False
        assert record["attempts"] == 1 and "--no-token-ids" in record["failure"]["message"], json.dumps(record)[:2000]


def test_the_exit_verdict():
    from prorl_gym.evaluation.cli import failure_verdict

    ok, task = {"failure": None}, {"failure": {"type": "timeout", "infra": False}}
    infra = {"failure": {"type": "sandbox_lost", "infra": True}}
    assert failure_verdict([ok, task], None) is None
    assert "infrastructure" in failure_verdict([ok, infra], None)
    assert failure_verdict([task, task], None) == "2 of 2 rollouts failed (timeout)"
    assert "above --max-failure-rate 0.25" in failure_verdict([ok, task], 0.25)
