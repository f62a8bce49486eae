# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The policy check before a stack starts (prorl_gym/preflight.py), against real HTTP servers: the
scripted policy answering as vLLM does, and as a server without token ids (--plain); a port where
nothing listens. Each wrong setting fails saying what was tried and what to change; `make eval` with a
wrong URL fails in seconds and starts nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from prorl_gym.paths import REPO_ROOT
from prorl_gym.preflight import PolicyCheck, PolicyCheckError, check_policy
from prorl_gym.stack import free_port, stop_session

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"


def _scripted_policy(log, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    argv = [sys.executable, "-m", "responses_api_models.scripted_policy", "--data", str(EXAMPLE), "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*argv, *extra], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, port


def _wait_up(proc: subprocess.Popen, port: int, log) -> str:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return f"http://127.0.0.1:{port}/v1"
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """{'vllm': url, 'plain': url}: the scripted policy as vLLM, and as a server without token ids (started
    together)."""
    logs = tmp_path_factory.mktemp("policies")
    started = {
        name: (*_scripted_policy(logs / f"{name}.log", *extra), logs / f"{name}.log")
        for name, extra in (("vllm", ()), ("plain", ("--plain",)))
    }
    try:
        yield {name: _wait_up(proc, port, log) for name, (proc, port, log) in started.items()}
    finally:
        for proc, _, _ in started.values():
            stop_session(proc)


def check(url: str, model: str = "scripted-gold", token_ids: bool = True) -> list[str]:
    return asyncio.run(check_policy(PolicyCheck([url], model, token_ids=token_ids)))


def refusal(url: str, **kwargs) -> str:
    with pytest.raises(PolicyCheckError) as exc:
        check(url, **kwargs)
    return str(exc.value)


def test_a_right_endpoint_passes_with_or_without_token_ids(endpoints):
    assert "gives token ids" in check(endpoints["vllm"])[0]
    assert "token ids off" in check(endpoints["plain"], token_ids=False)[0]


def test_nothing_listening_is_said_with_the_url_and_what_to_check():
    url = f"http://127.0.0.1:{free_port()}/v1"
    said = refusal(url)
    assert f"GET {url}/models: cannot connect (Connect call failed" in said or "Connection refused" in said, said
    assert "fix: check the URL" in said


def test_a_model_the_endpoint_does_not_serve_lists_those_it_does(endpoints):
    said = refusal(endpoints["vllm"], model="Qwen/Qwen3-8B")
    assert "scripted-gold" in said and "MODEL=" in said and "fix:" in said


def test_a_base_url_without_the_api_root_is_said(endpoints):
    said = refusal(endpoints["vllm"].removesuffix("/v1"))
    assert "/chat/completions" in said and "OpenAI API root" in said


def test_token_ids_from_an_endpoint_without_them_name_the_switch(endpoints):
    said = refusal(endpoints["plain"])
    assert "no per-token log-probs with token ids" in said and "TOKEN_IDS=0" in said


def test_make_eval_with_a_wrong_url_fails_at_once_and_starts_nothing(tmp_path):
    """docs/service.md's case ("Checked before anything starts"): a typo in the policy URL. Nothing listens there; the command says so and exits 2
    before any process of a stack exists (its log directory is never made)."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "eval"
    argv = [sys.executable, "-m", "prorl_gym.evaluation", "--env", "math", "--split", "validation", "--limit", "2"]
    argv += ["--repeats", "1", "--policy-base-url", url, "--policy-model", "x", "--no-token-ids", "--out", str(out)]
    started = time.monotonic()
    run = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    elapsed = time.monotonic() - started
    assert run.returncode == 2, run.stderr
    assert f"GET {url}/models: cannot connect" in run.stderr and "nothing was started" in run.stderr
    assert not (out / "logs").exists()
    print(f"a wrong policy URL failed the evaluation command in {elapsed:.1f}s")
