# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The capture endpoint's real servers for tests/capture (conftest.py serves them once): the scripted
policy answering as vLLM serving Qwen3 would (the only stand-in: no GPU), the model server in
token-in/token-out mode with Qwen3's real tokenizer and chat template, the gateway on uvicorn."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import aiohttp
from fastapi import FastAPI
from openai import AsyncOpenAI

from prorl_gym.capture import CaptureGateway
from prorl_gym.testing import PYTHON_TOOL, DirectPeer, served_app
from responses_api_models.balanced_vllm_model.tests.harness import ROWS, Policies, serve_model
from responses_api_models.scripted_policy.real_tokens import DRIFT_CASES

TOOLS = [PYTHON_TOOL]


def row_for(case: str | None, n: int = 0) -> dict:
    row = json.loads(json.dumps(ROWS[n]))
    if case:
        user = next(m for m in row["responses_create_params"]["input"] if m["role"] == "user")
        user["content"] += f"\n[drift: {case}]"
    return row


@asynccontextmanager
async def capture_stack(tmp_path):
    """(gateway, its URL, the policy)."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row_for(c, n)) + "\n" for c in (None, *DRIFT_CASES) for n in (0, 1)))
    policies = Policies(tmp_path)
    try:
        (policy,) = await policies.start(1, data=data, args=("--tokenizer", "qwen3"))
        settings = dict(uses_reasoning_parser=True, token_mode="tito", tokenizer="qwen3")
        async with serve_model([policy.url], **settings) as server:
            gateway = CaptureGateway(DirectPeer(server.url, server.http), "policy_model", call_timeout_s=30)
            async with serve(gateway) as url:
                yield gateway, url, policy
    finally:
        policies.stop_all()


def serve(gateway: CaptureGateway):
    app = FastAPI()
    app.include_router(gateway.router())
    return served_app(app)


async def open_capture(url: str, **limits) -> tuple[str, AsyncOpenAI]:
    async with aiohttp.ClientSession() as http, http.post(f"{url}/capture", json=limits) as r:
        opened = await r.json()
    return opened["key"], AsyncOpenAI(base_url=url + opened["base_path"], api_key="unused", max_retries=0)


async def sampled(policy) -> list[list[int]]:
    """What the policy generated, oldest first."""
    async with aiohttp.ClientSession() as http, http.get(policy.url.removesuffix("/v1") + "/sampled") as r:
        return [s["ids"] for s in await r.json()]
