# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""An in-memory stand-in for NeMo Gym's ServerClient: routes calls to Python handlers.

The real servers are exercised end to end in tests/test_end_to_end.py; here the agent's
own logic (loop, limits, failure typing, release) is tested against scripted peers.
"""

from __future__ import annotations

import asyncio
import json
from http.cookies import SimpleCookie

from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from pydantic import BaseModel, PrivateAttr

from prorl_gym.testing import transcript


class FakeResponse:
    def __init__(self, status: int, body, cookies: dict[str, str] | None = None):
        self.status = status
        self._body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.cookies = SimpleCookie(cookies or {})
        self.ok = status < 400

    async def read(self) -> bytes:
        return self._body


class FakeClient(ServerClient):
    _routes: dict = PrivateAttr(default_factory=dict)
    calls: list = []

    @classmethod
    def create(cls) -> FakeClient:
        client = cls(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=OmegaConf.create({})
        )
        client.calls = []
        return client

    def route(self, server: str, path: str, handler) -> None:
        self._routes[(server, path)] = handler

    async def post(self, server_name: str, url_path: str, json=None, cookies=None, **_):
        body = json.model_dump(exclude_unset=True, mode="json") if isinstance(json, BaseModel) else json
        self.calls.append((server_name, url_path, body, dict(cookies or {})))
        handler = self._routes.get((server_name, url_path))
        if handler is None:
            return FakeResponse(404, {"detail": "Not Found"})
        result = handler(body)
        if asyncio.iscoroutine(result):
            result = await result
        return result if isinstance(result, FakeResponse) else FakeResponse(200, result)

    async def get(self, server_name: str, url_path: str, **kwargs):
        return await self.post(server_name, url_path, **kwargs)


def model_turns(*turns):
    """A model server handler replaying turns: each is ("text", str) or ("calls", [(name, args)])."""
    remaining = list(turns)

    def handler(body):
        kind, value = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        response = transcript(value if kind == "text" else None, value if kind == "calls" else [])
        response["output"] = [o for o in response["output"] if o["type"] != "function_call_output"]
        response["usage"] = {
            "input_tokens": 10,
            "output_tokens": 7,
            "total_tokens": 17,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return FakeResponse(200, response, {"model_session": "m1"})

    return handler


TOOLS = [
    {"type": "function", "name": "bash", "description": "", "parameters": {"type": "object"}, "strict": True},
    {"type": "function", "name": "python", "description": "", "parameters": {"type": "object"}, "strict": True},
]


def resources(client: FakeClient, tool_status: int = 200, verify=None):
    """Routes for a resources server named 'env' that echoes tool calls."""
    seeded = {"sandbox_id": "s1", "host": "node-a"}
    client.route("env", "/seed_session", lambda body: FakeResponse(200, seeded, {"env_session": "e1"}))
    client.route("env", "/tools", lambda body: {"tools": TOOLS, "ends_rollout": []})
    client.route("env", "/release", lambda body: {"released": True})

    def tool(body):
        if "command" not in body:
            return FakeResponse(422, {"detail": [{"loc": ["body", "command"], "msg": "Field required"}]})
        return FakeResponse(tool_status, {"content": f"ran {body['command']}", "metadata": {}})

    client.route("env", "/bash", tool)
    client.route("env", "/verify", verify or (lambda body: body | {"reward": 1.0, "failure": None}))
