# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The llama.cpp launcher with the real model: the policy check before a stack uses it (preflight.py)
accepts it once it is loaded, asked as the model server asks it; a wrong model name is refused; SIGTERM
stops it in order, saying what it did. How many threads it takes when not told."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from prorl_gym.errors import ProrlError
from prorl_gym.local_models import local_model, verified
from prorl_gym.paths import REPO_ROOT
from prorl_gym.preflight import PolicyCheck, PolicyCheckError, check_policy
from prorl_gym.stack import free_port, stop_session
from responses_api_models.llamacpp_policy.threads import choose_threads, default_threads, usable_cores

MODEL = "qwen2.5-coder-0.5b"


def test_threads_every_core_only_when_nothing_else_runs():
    assert choose_threads(2, 0) == 2 and choose_threads(8, 0.0) == 8
    assert choose_threads(2, 1) == 1 and choose_threads(2, 14) == 1
    threads, why = default_threads()
    assert 1 <= threads <= usable_cores() and "usable cores" in why


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    try:
        verified(local_model(MODEL))
    except ProrlError as exc:  # make setup fetches it; never at test time
        pytest.skip(str(exc))
    log = tmp_path_factory.mktemp("llamacpp") / "llamacpp.log"
    port = free_port()
    argv = [sys.executable, "-m", "responses_api_models.llamacpp_policy", "--model", MODEL, "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300  # loads in ~1 s idle, tens of seconds on a busy machine
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            break
        except OSError:  # not listening yet, or 503 while it loads
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    yield proc, f"http://127.0.0.1:{port}/v1", log
    stop_session(proc)


def check(url: str, model: str = MODEL) -> list[str]:
    return asyncio.run(check_policy(PolicyCheck([url], model, completion_api="llamacpp")))


def test_the_policy_check_accepts_it_once_loaded(launcher):
    _, url, _ = launcher
    (said,) = check(url)
    assert f"serves {MODEL!r}, gives token ids" in said


def test_a_model_name_it_does_not_serve_is_refused_with_the_one_it_does(launcher):
    _, url, _ = launcher
    with pytest.raises(PolicyCheckError) as exc:
        check(url, model="Qwen/Qwen3-8B")
    assert MODEL in str(exc.value) and "fix:" in str(exc.value)


def test_sigterm_stops_it_saying_what_it_did(launcher):
    proc, url, log = launcher
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    said = log.read_text()
    assert "stopping on SIGTERM" in said and "generated" in said and "CPU-s" in said, said
    port = int(url.removesuffix("/v1").rsplit(":", 1)[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing listens there any more
