# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""An environment's own tools on the base resources server: a tool named like one of the server's routes
is refused (it would shadow /verify, /tools, ...); a tool whose handler is a server method named in `run`
is served by that method, and one naming a method the server lacks is refused at set-up."""

from __future__ import annotations

from typing import ClassVar

import pytest

from prorl_gym.resources.server import SandboxResourcesServer
from prorl_gym.resources.tools import Tool, ToolArgs, ToolResult
from prorl_gym.testing import build_server


class EchoArgs(ToolArgs):
    text: str


def echo_tool(name: str, run: str = "run_echo") -> Tool:
    return Tool(name=name, description="Echo the text.", args=EchoArgs, run=run, summary=f"`{name}` echoes")


class ToolServer(SandboxResourcesServer):
    own_tools: ClassVar[tuple[Tool, ...]] = ()

    @classmethod
    def environment_tools(cls) -> list[Tool]:
        return list(cls.own_tools)

    async def run_echo(self, sandbox, args: EchoArgs) -> ToolResult:
        result = await sandbox.bash(f"echo {args.text} from $PWD")
        return ToolResult(content=f"{self.config.name}: {result.output.strip()}")


def server_with(*tools: Tool, **config):
    cls = type("Server", (ToolServer,), {"own_tools": tools})
    return cls, build_server(cls, "tools_env", tools=[t.name for t in tools], **config)


@pytest.mark.parametrize(
    "name", ["seed_session", "verify", "tools", "metrics", "release", "status", "snapshot", "hosts", "harness"]
)
def test_a_tool_named_like_a_route_is_refused(name):
    _, server = server_with(echo_tool(name))
    with pytest.raises(ValueError, match=f"tool '{name}' is named like a route of the server"):
        server.setup_webserver()


def test_a_tool_naming_a_method_the_server_lacks_is_refused():
    _, server = server_with(echo_tool("echo", run="run_ecko"))
    with pytest.raises(ValueError, match="tool 'echo' runs 'run_ecko', which Server has no method named"):
        server.setup_webserver()


def test_a_tool_run_by_a_server_method_is_served_by_it(serve):
    cls, _ = server_with(echo_tool("echo"))
    client = serve(cls, "tools_env", tools=["echo"])
    assert [t["name"] for t in client.get("/tools").json()["tools"]] == ["echo"]
    assert client.post("/seed_session", json={}).status_code == 200
    reply = client.post("/echo", json={"text": "hi"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["content"] == "tools_env: hi from /workspace"
    assert client.post("/echo", json={"txt": "hi"}).status_code == 422  # tool arguments are strict too
    client.post("/release")
