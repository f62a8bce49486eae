# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Real servers for the integration tests: scripted policy processes, the model server on uvicorn.

Nothing is mocked: the policies are `python -m responses_api_models.scripted_policy`
processes on free ports (stand-ins for vLLM servers), the model server is the real app
served by uvicorn in the test's event loop, and rollouts talk HTTP with session cookies.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf

from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import free_port, stop_session
from prorl_gym.testing import build_server, served_app
from responses_api_models.balanced_vllm_model.app import ENDPOINT_HEADER, BalancedVLLMModel

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
ROWS = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
TOOLS = [
    {
        "type": "function",
        "name": "python",
        "strict": False,
        "description": "run code",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    }
]
FAST = dict(
    health_interval_s=0.2, health_timeout_s=0.5, unhealthy_after=2, request_timeout_s=30.0, connect_timeout_s=1.0
)


@dataclass
class Policy:
    port: int
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def kill(self) -> None:  # as if the GPU server crashed
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def pause(self) -> None:  # hung: the port stays open, nothing answers
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)


class Policies:
    """Starts scripted policies; stops every one it started (also paused ones)."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self._started: list[Policy] = []

    async def start(
        self, n: int, latency_ms: float = 0.0, port: int | None = None, data: Path = EXAMPLE, args: tuple = ()
    ) -> list[Policy]:
        """n scripted policies; `args` more of their command line (e.g. --tokenizer qwen3)."""
        policies = [self._spawn(latency_ms, port or free_port(), data, args) for _ in range(n)]
        await asyncio.gather(*(self._wait_up(p) for p in policies))
        return policies

    def _spawn(self, latency_ms: float, port: int, data: Path, args: tuple) -> Policy:
        argv = [
            sys.executable,
            "-m",
            "responses_api_models.scripted_policy",
            "--data",
            str(data),
            "--port",
            str(port),
            "--latency-ms",
            str(latency_ms),
            *args,
        ]
        with open(self.log_dir / f"policy-{port}.log", "a") as log:
            proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        policy = Policy(port, proc)
        self._started.append(policy)
        return policy

    async def _wait_up(self, policy: Policy, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                assert policy.proc.poll() is None, f"scripted policy exited; see {self.log_dir}"
                try:
                    async with http.get(f"http://127.0.0.1:{policy.port}/health") as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise TimeoutError(f"scripted policy on {policy.port} not up")

    def stop_all(self) -> None:
        for policy in self._started:
            if policy.proc.poll() is None:
                policy.resume()
                stop_session(policy.proc, grace_s=5, sig=signal.SIGKILL)  # no state to save


@dataclass
class Turn:
    status: int
    body: Any
    endpoint: str | None  # the x-policy-endpoint header: who served (or failed) it
    elapsed_s: float
    finished_at: float  # time.monotonic()


@dataclass
class ModelServer:
    url: str
    server: BalancedVLLMModel
    http: aiohttp.ClientSession

    async def endpoints(self) -> dict[str, dict]:
        async with self.http.get(f"{self.url}/endpoints") as r:
            return {e["url"]: e for e in (await r.json())["endpoints"]}

    async def admin(self, method: str, url: str, **extra: Any) -> tuple[int, Any]:
        async with self.http.request(method, f"{self.url}/endpoints", json={"url": url} | extra) as r:
            return r.status, await r.json()

    async def wait_for(self, predicate, timeout_s: float = 10.0) -> dict[str, dict]:
        """Poll GET /endpoints until predicate(endpoints) holds."""
        deadline = time.monotonic() + timeout_s
        while True:
            endpoints = await self.endpoints()
            if predicate(endpoints):
                return endpoints
            assert time.monotonic() < deadline, f"condition not met; endpoints: {endpoints}"
            await asyncio.sleep(0.02)


@dataclass
class Rollout:
    """One rollout: one model-server session (cookie), turns that extend one conversation."""

    server: ModelServer
    row: dict = field(default_factory=lambda: ROWS[0])  # its first user message selects the script
    metadata: dict[str, str] | None = None  # the request's (e.g. chat_template_kwargs, as a JSON string)
    cookies: dict[str, str] = field(default_factory=dict)
    items: list[dict] = field(default_factory=list)
    endpoint: str | None = None  # where its session is bound, once a turn has been served
    prefix: str = ""  # before /v1/responses: NeMo Gym 0.7's rollout prefix (/ng-rollout/<id>[/training-token-capture])

    def __post_init__(self) -> None:
        self.items = [dict(m) for m in self.row["responses_create_params"]["input"]]

    async def turn(self) -> Turn:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        started = time.monotonic()
        body = {"input": self.items, "tools": TOOLS} | ({"metadata": self.metadata} if self.metadata else {})
        url = f"{self.server.url}{self.prefix}/v1/responses"
        async with self.server.http.post(url, json=body, headers=headers) as r:
            payload = await r.json(content_type=None)
            self.cookies |= {name: morsel.value for name, morsel in r.cookies.items()}
            finished = time.monotonic()
            turn = Turn(r.status, payload, r.headers.get(ENDPOINT_HEADER), finished - started, finished)
        self.endpoint = self.endpoint or turn.endpoint
        if r.status == 200:
            for item in payload["output"]:
                self.items.append(item)
                if item["type"] == "function_call":
                    self.items.append({"type": "function_call_output", "call_id": item["call_id"], "output": "42"})
        return turn


@asynccontextmanager
async def serve_model(
    urls: list[str], global_config: dict | None = None, **settings: Any
) -> AsyncIterator[ModelServer]:
    """The model server as ng_run would run it (exception middleware too), on a free port; `global_config`:
    the run's (e.g. NeMo Gym's token_id_capture block)."""
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1),
        global_config_dict=OmegaConf.create(global_config or {}),
    )
    server = build_server(
        BalancedVLLMModel,
        "policy_model",
        client,
        base_url=urls,
        api_key="x",
        model="scripted-gold",
        return_token_id_information=True,
        **({"uses_reasoning_parser": False} | FAST | settings),
    )
    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    jar = aiohttp.DummyCookieJar()
    async with served_app(app, lifespan="on") as url, aiohttp.ClientSession(cookie_jar=jar) as http:
        yield ModelServer(url, server, http)
