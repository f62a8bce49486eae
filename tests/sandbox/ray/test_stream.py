# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The tool-call stream of a sandbox host (the Ray actor's class, run here without Ray): tool
calls and their errors as an actor call gives them, only to a client with the host's token,
nothing but the tool calls, cancellation carried to the host, and a host that goes away
failing the calls in flight as lost."""

from __future__ import annotations

import asyncio
import json

import pytest

from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.sandbox import SandboxClosedError, SandboxFileNotFound, SandboxLostError
from prorl_gym.sandbox.backends.ray.host import SandboxHost
from prorl_gym.sandbox.backends.ray.stream import HEADER, StreamBroken, ToolStream, _frame, _read_frame


@pytest.fixture
async def host(sandbox_spec):
    host = SandboxHost("h0", "test@node")
    status = await host.start([sandbox_spec.root_dir], "127.0.0.1")
    host.address, host.token = tuple(status["stream"]["address"]), status["stream"]["token"]
    try:
        yield host
    finally:
        await host.shutdown()


@pytest.fixture
async def stream(host):
    client = ToolStream(host.address, host.token, host.name)
    try:
        yield client
    finally:
        await client.close()


async def test_tool_calls_and_their_errors_come_back_as_from_the_actor(host, stream, sandbox_spec):
    sandbox_id = "s1"
    await host.create(sandbox_id, sandbox_spec.model_dump_json())
    shell = await stream.call("bash", sandbox_id, "echo hi; cd /tmp", None)
    assert isinstance(shell, ShellResult) and shell.output == "hi\n" and shell.exit_code == 0
    assert (await stream.call("bash", sandbox_id, "pwd", 5.0)).output == "/tmp\n"  # one persistent shell
    py = await stream.call("python", sandbox_id, "x = 6 * 7\nx", None)
    assert isinstance(py, PythonResult) and py.output == "42\n"
    await stream.call("write_file", sandbox_id, "blob.bin", bytes(range(256)))
    assert await stream.call("read_bytes", sandbox_id, "blob.bin") == bytes(range(256))
    await stream.call("write_file", sandbox_id, "a.txt", "one\ntwo\n")
    assert "two" in await stream.call("read_file", sandbox_id, "a.txt", 2, 2)
    await stream.call("edit_file", sandbox_id, "a.txt", "two", "three")
    assert (await stream.call("bash", sandbox_id, "cat /workspace/a.txt", None)).output == "one\nthree\n"
    with pytest.raises(SandboxFileNotFound):
        await stream.call("read_file", sandbox_id, "missing.txt", None, None)
    with pytest.raises(SandboxClosedError):
        await stream.call("bash", "no-such-sandbox", "true", None)
    calls = [stream.call("bash", sandbox_id, f"sleep 0.2; echo {i}", None) for i in range(4)]
    assert [r.output for r in await asyncio.gather(*calls)] == [f"{i}\n" for i in range(4)]  # multiplexed


async def test_only_the_tool_calls_and_only_with_the_token(host, sandbox_spec):
    await host.create("s1", sandbox_spec.model_dump_json())
    with pytest.raises(StreamBroken):  # the host closes the connection without reading on
        await ToolStream(host.address, "0" * 64, host.name).call("bash", "s1", "touch /workspace/pwned", None)
    reader, writer = await asyncio.open_connection(*host.address)
    writer.write(_frame({"token": host.token}))
    for method in ("shutdown", "close", "create", "freeze", "_get"):
        writer.write(_frame({"id": 1, "method": method, "sandbox_id": "s1", "args": []}))
        reply = await _read_frame(reader)
        assert reply["error"]["type"].endswith("SandboxError") and "not a streamed call" in reply["error"]["message"]
    writer.write(_frame({"id": 2, "method": "write_file", "sandbox_id": "s1", "args": ["x", {"pickle": "..."}]}))
    assert "not a value" in (await _read_frame(reader))["error"]["message"]  # JSON values only, never pickle
    writer.write(HEADER.pack(1 << 31))  # a frame too large to be one: the host hangs up
    assert await reader.read() == b""
    writer.close()
    assert "s1" in host._sandboxes and not (await host.bash("s1", "ls /workspace", None)).output.strip()


async def test_a_cancelled_call_is_cancelled_on_the_host(host, stream, sandbox_spec):
    await host.create("s1", sandbox_spec.model_dump_json())
    call = asyncio.create_task(stream.call("bash", "s1", "sleep 30", None))
    await asyncio.sleep(0.5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # the shell is free again at once (a host-side call still running would hold it for 30 s)
    result = await asyncio.wait_for(stream.call("bash", "s1", "echo free", None), 10)
    assert "free" in result.output


async def test_a_host_that_goes_away_fails_the_calls_in_flight_as_lost(sandbox_spec):
    host = SandboxHost("h1", "test@node")
    status = await host.start([sandbox_spec.root_dir], "127.0.0.1")
    client = ToolStream(tuple(status["stream"]["address"]), status["stream"]["token"], "h1")
    await host.create("s1", sandbox_spec.model_dump_json())
    call = asyncio.create_task(client.call("bash", "s1", "sleep 30", None))
    await asyncio.sleep(0.3)
    await host.shutdown()
    with pytest.raises(SandboxLostError):
        await asyncio.wait_for(call, 10)
    with pytest.raises(SandboxLostError):  # and a later call finds no host to connect to
        await client.call("bash", "s1", "true", None)
    await client.close()
    assert json.loads(json.dumps(status["stream"]))  # what the placer gets over Ray is plain JSON
