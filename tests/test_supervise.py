# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The supervisor (prorl_gym/supervise.py) with a real child process: a killed server is started
again on its address; one that crash-loops after it served is given up on, and its address then
answers 503 server_gave_up until the supervisor is stopped; one that never served ends the
supervision with its exit code (ng_run reports it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from prorl_gym.supervise import GAVE_UP_ERROR

HOST = "127.0.0.2"
SERVER = """
import os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from prorl_gym.supervise import supervised

port, state, fail_after = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])


class Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        body = str(os.getpid()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def run():
    starts = int(state.read_text() or 0) + 1 if state.exists() else 1
    state.write_text(str(starts))
    if starts > fail_after:
        sys.exit(3)  # every start after the first `fail_after` fails at once
    HTTPServer(("127.0.0.2", port), Ok).serve_forever()


supervised(run, address=lambda: ("127.0.0.2", port))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def get(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def until(predicate, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if (value := predicate()) is not None:
                return value
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.fixture
def supervise(tmp_path):
    started = []

    def start(fail_after: int) -> tuple[subprocess.Popen, int]:
        script, port = tmp_path / "server.py", free_port()
        script.write_text(SERVER)
        env = os.environ | {"PRORL_CRASH_WINDOW_S": "1", "PRORL_RESTART_DELAY_S": "0.05"}
        argv = [sys.executable, str(script), str(port), str(tmp_path / "starts"), str(fail_after)]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc, port

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_killed_server_is_started_again_on_its_address(supervise):
    proc, port = supervise(fail_after=99)
    first = int(until(lambda: get(port)[1] or None))
    os.kill(first, signal.SIGKILL)
    second = int(until(lambda: (pid := get(port)[1]) and int(pid) != first and pid or None))
    assert second != first and proc.poll() is None


def test_a_server_that_crash_loops_after_serving_is_answered_for_as_gone(supervise, tmp_path):
    proc, port = supervise(fail_after=1)
    first = int(until(lambda: get(port)[1] or None))
    time.sleep(1.2)  # it served longer than the crash window
    os.kill(first, signal.SIGKILL)  # its next starts all fail: a crash loop
    status, body = until(lambda: (answer := get(port))[0] == 503 and answer or None)
    assert json.loads(body)["error"]["type"] == GAVE_UP_ERROR and proc.poll() is None  # the stack goes on
    assert int((tmp_path / "starts").read_text()) == 6  # 1 served, then 5 quick deaths
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 3


def test_a_server_that_never_served_ends_the_supervision_with_its_code(supervise):
    proc, port = supervise(fail_after=0)
    assert proc.wait(timeout=30) == 3
    assert "giving up" in proc.stderr.read()
    with pytest.raises(OSError):
        get(port)


EARLY_SERVER = """
from prorl_gym.supervise import supervise_early

supervise_early(__name__)

import os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy  # stands for the server's own imports (NeMo Gym, Ray, ...): the supervisor never pays them

from prorl_gym.supervise import supervised

port = int(sys.argv[1])


class Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        body = str(os.getpid()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


supervised(lambda: HTTPServer(("127.0.0.2", port), Ok).serve_forever(), address=lambda: ("127.0.0.2", port))
"""


def test_an_app_that_supervises_early_leaves_its_imports_to_the_child(tmp_path):
    script, port = tmp_path / "app.py", free_port()
    script.write_text(EARLY_SERVER)
    env = os.environ | {"PRORL_CRASH_WINDOW_S": "1", "PRORL_RESTART_DELAY_S": "0.05"}
    proc = subprocess.Popen([sys.executable, str(script), str(port)], env=env, stderr=subprocess.DEVNULL)
    try:
        child = int(until(lambda: get(port)[1] or None))
        assert child != proc.pid
        maps = lambda pid: Path(f"/proc/{pid}/maps").read_text()  # noqa: E731
        assert "numpy" in maps(child) and "numpy" not in maps(proc.pid)
        os.kill(child, signal.SIGKILL)  # and it supervises as the late one does
        assert int(until(lambda: (body := get(port)[1]) and int(body) != child and body or None)) != child
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
