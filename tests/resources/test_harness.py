# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A harness inside a real sandbox (bubblewrap, no network): its one way out is the model socket,
which passes its OpenAI calls to the rollout's capture endpoint (here a real HTTP server recording
what reaches it) and nothing else. mini-swe-agent itself runs this way in
responses_api_agents/prorl_agent/tests/test_harness.py."""

from __future__ import annotations

import json
import socket

import pytest
from aiohttp import web

from prorl_gym.resources.harness import UnknownHarnessEnv, harness_env_binds, harness_env_dir, run_harness
from prorl_gym.wire.resources import HarnessRunRequest

KEY = "k3y"


@pytest.fixture
async def capture():
    """The capture endpoint's stand-in on the host's TCP loopback: answers a chat completion, records every request."""
    seen: list[tuple[str, str, dict]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        seen.append((request.method, request.path, body))
        answer = {"choices": [{"message": {"role": "assistant", "content": "hello from the policy"}}]}
        return web.json_response(answer)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/capture/{KEY}/v1", port, seen
    finally:
        await runner.cleanup()


def request(command: str, base_url: str, timeout_s: float = 60, task: str = "fix the bug") -> HarnessRunRequest:
    return HarnessRunRequest(
        harness_env="mini_swe_agent", command=command, task=task, model_base_url=base_url, timeout_s=timeout_s
    )


# Runs inside the sandbox on its own Python: what an escaping harness would try.
PROBE = r"""
import json, os, socket, sys, urllib.request, urllib.error
url, host_port = os.environ["PRORL_MODEL_URL"], int(sys.argv[1])
out = {"task": open(os.environ["PRORL_TASK_FILE"]).read()}
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, None
out["chat"] = call("POST", "/chat/completions", {"model": "policy", "messages": [{"role": "user", "content": "hi"}]})
out["get"] = call("GET", "/models")[0]
out["embeddings"] = call("POST", "/embeddings", {"input": "hi"})[0]
out["traverse"] = call("POST", "/../../../capture/other/end", {})[0]
out["encoded"] = call("POST", "/chat%2F..%2F..%2Fend", {})[0]
def reach(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(address)
        return "connected"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
out["host_tcp"] = reach(socket.AF_INET, ("127.0.0.1", host_port))
out["internet"] = reach(socket.AF_INET, ("1.1.1.1", 443))
out["host_abstract_unix"] = reach(socket.AF_UNIX, "\0" + sys.argv[2])
print("PROBE " + json.dumps(out))
"""


async def test_the_model_socket_passes_openai_calls_to_the_capture_and_nothing_else(sandbox, capture):
    base_url, port, seen = capture
    host_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a host service on an abstract socket
    host_socket.bind(f"\0prorl-harness-test-{port}")
    host_socket.listen()
    try:
        await sandbox.write_file("/tmp/probe.py", PROBE)
        result = await run_harness(
            sandbox, request(f"python3 /tmp/probe.py {port} prorl-harness-test-{port}", base_url, task="fix the bug")
        )
    finally:
        host_socket.close()
    assert result.exit_code == 0 and not result.timed_out, result.output
    probe = json.loads(next(line for line in result.output.splitlines() if line.startswith("PROBE "))[6:])
    assert probe["task"] == "fix the bug"
    assert probe["chat"] == [
        200,
        {"choices": [{"message": {"role": "assistant", "content": "hello from the policy"}}]},
    ]
    assert [probe[k] for k in ("get", "embeddings", "traverse", "encoded")] == [405, 404, 404, 404]
    assert probe["host_tcp"] == "ConnectionRefusedError"  # the sandbox's loopback is its own
    assert probe["internet"] == "OSError"  # no route: the sandbox has no network (ENETUNREACH)
    assert probe["host_abstract_unix"] == "ConnectionRefusedError"  # nor the host's abstract sockets
    # the capture saw exactly the one call, at the rollout's own path
    assert seen == [
        (
            "POST",
            f"/capture/{KEY}/v1/chat/completions",
            {"model": "policy", "messages": [{"role": "user", "content": "hi"}]},
        )
    ]
    assert not (sandbox.socket_dir / "model.sock").exists()  # closed with the run


async def test_a_harness_past_its_time_is_stopped_and_its_socket_closed(sandbox, capture):
    base_url, _, seen = capture
    result = await run_harness(sandbox, request("echo started; sleep 600", base_url, timeout_s=1))
    assert result.timed_out and "started" in result.output
    assert not (sandbox.socket_dir / "model.sock").exists()
    # the forwarder ended with the harness's shell; the sandbox's shell is usable again
    after = await sandbox.bash("sleep 1; pgrep -fc loopback_forward || true")
    assert after.output.strip() == "0" and seen == []


async def test_a_harness_that_fails_reports_its_exit_and_output(sandbox, capture):
    base_url, _, _ = capture
    result = await run_harness(sandbox, request("echo 'Traceback: boom' >&2; exit 3", base_url))
    assert result.exit_code == 3 and "Traceback: boom" in result.output


async def test_a_sandbox_on_another_host_cannot_run_one(capture):
    class Remote:  # a sandbox without a directory shared with this machine (a Ray host's)
        workspace = "/workspace"

    with pytest.raises(NotImplementedError, match="placement: agent"):
        await run_harness(Remote(), request("true", capture[0]))


def test_an_environment_that_is_not_built_is_named():
    with pytest.raises(UnknownHarnessEnv, match="make setup"):
        harness_env_binds(["no_such_harness"])


def test_a_built_environment_is_bound_read_only_with_its_interpreter():
    if not (harness_env_dir("mini_swe_agent") / ".prorl-installed").exists():
        pytest.skip("make setup builds .venvs/harnesses/mini_swe_agent")
    binds = harness_env_binds(["mini_swe_agent"])
    assert binds[0].src == str(harness_env_dir("mini_swe_agent"))
    assert all(not b.writable and b.hide_packages for b in binds) and len(binds) >= 1
