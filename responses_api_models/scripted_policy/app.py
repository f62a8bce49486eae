# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy's HTTP server: OpenAI chat completions + vLLM's /tokenize.

STAND-IN for a GPU model. It replays recorded actions (see scripts.py) for the task whose
first user message it recognises, and returns token ids and log-probs the way vLLM does
(`logprobs` with `return_tokens_as_token_ids`), so NeMo Gym's `vllm_model` with
`return_token_id_information: true` works against it unchanged.

Mode per request: `metadata.scripted_mode`, else the model name `scripted-<mode>`, else
the server default. Latency per request: `metadata.scripted_latency_ms`, else `--latency-ms`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from responses_api_models.scripted_policy.chat_template import decode, encode, render, render_assistant
from responses_api_models.scripted_policy.scripts import MODES, Step, build_script

log = logging.getLogger(__name__)


def _first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return ""


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class ScriptedPolicy:
    def __init__(
        self,
        rows: list[dict],
        default_mode: str = "gold",
        tool_calls: int = 1,
        latency_s: float = 0.0,
        tool_aliases: dict[str, str] | None = None,
    ):
        if default_mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.default_mode = default_mode
        self.tool_calls = tool_calls
        self.latency_s = latency_s
        # recorded tool name -> the name to call it by (another stack's tool for the same actions)
        self.tool_aliases = tool_aliases or {}
        self._rows = {_key(_first_user_text(row["responses_create_params"]["input"])): row for row in rows}
        self._scripts: dict[tuple[str, str], list[Step]] = {}

    @classmethod
    def from_files(cls, paths: list[str | Path], **kwargs) -> ScriptedPolicy:
        rows = []
        for path in paths:
            with open(path) as f:
                rows.extend(json.loads(line) for line in f if line.strip())
        return cls(rows, **kwargs)

    def mode_for(self, body: dict) -> str:
        mode = (body.get("metadata") or {}).get("scripted_mode")
        model = body.get("model") or ""
        if not mode and model.startswith("scripted-"):
            mode = model.removeprefix("scripted-")
        return mode if mode in MODES else self.default_mode

    def latency_for(self, body: dict) -> float:
        """`metadata.scripted_latency_ms` (a slow generation for one row), else the server's default."""
        value = (body.get("metadata") or {}).get("scripted_latency_ms")
        try:
            return max(0.0, float(value) / 1000) if value is not None else self.latency_s
        except (TypeError, ValueError):
            return self.latency_s

    def next_step(self, messages: list[dict], mode: str) -> Step:
        key = _key(_first_user_text(messages))
        row = self._rows.get(key)
        if row is None:
            log.warning("scripted policy: no script for this prompt; answering that it has none")
            return Step(content="[scripted policy: no recorded actions for this task]")
        script = self._scripts.get((key, mode))
        if script is None:
            script = build_script(row, mode, tool_calls=self.tool_calls)
            if self.tool_aliases:
                script = [_aliased(step, self.tool_aliases) for step in script]
            self._scripts[(key, mode)] = script
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return script[min(turn, len(script) - 1)]


def _aliased(step: Step, aliases: dict[str, str]) -> Step:
    calls = [call | {"name": aliases.get(call["name"], call["name"])} for call in step.tool_calls]
    return Step(content=step.content, tool_calls=calls)


def create_app(policy: ScriptedPolicy) -> FastAPI:
    app = FastAPI(title="scripted policy (stand-in for a GPU model)")
    # time spent answering (the policy's own share of a turn, for benchmarks), and requests by path
    busy: dict = {"requests": 0, "busy_s": 0.0, "paths": {}}

    def account(app):  # plain ASGI: a BaseHTTPMiddleware would add its own cost to what it measures
        async def timed(scope, receive, send):
            started = time.perf_counter()
            try:
                await app(scope, receive, send)
            finally:
                if scope["type"] == "http" and scope["path"] != "/stats":
                    busy["requests"] += 1
                    busy["busy_s"] += time.perf_counter() - started
                    busy["paths"][scope["path"]] = busy["paths"].get(scope["path"], 0) + 1

        return timed

    app.add_middleware(account)

    @app.get("/stats")
    async def stats() -> dict:
        return busy

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": f"scripted-{m}", "object": "model"} for m in MODES]}

    @app.post("/tokenize")
    async def tokenize(request: Request) -> dict:
        body = await request.json()
        tokens = encode(render(body.get("messages", []), body.get("tools")))
        return {"count": len(tokens), "max_model_len": 1 << 20, "tokens": tokens}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return JSONResponse(
                status_code=400, content={"object": "error", "message": "messages must be a non-empty list"}
            )
        latency_s = policy.latency_for(body)
        if latency_s:
            await asyncio.sleep(latency_s)
        step = policy.next_step(messages, policy.mode_for(body))
        return completion(body, messages, step)

    return app


def completion(body: dict, messages: list[dict], step: Step) -> dict:
    tool_calls = [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": dict(c)} for c in step.tool_calls
    ]
    generated = encode(render_assistant(step.content, tool_calls))
    finish_reason = "tool_calls" if tool_calls else "stop"
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    content: str | None = step.content or None
    if max_tokens and len(generated) > max_tokens:  # cut mid-generation, as a real model would
        generated = generated[:max_tokens]
        content, tool_calls, finish_reason = decode(generated), [], "length"
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls or None}
    choice: dict = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
    if body.get("logprobs"):
        as_ids = body.get("return_tokens_as_token_ids")
        choice["logprobs"] = {
            "content": [
                {
                    "token": f"token_id:{t}" if as_ids else decode([t]),
                    "logprob": -0.01 * (1 + t % 7),  # deterministic, plausible values
                    "bytes": [t],
                    "top_logprobs": [],
                }
                for t in generated
            ]
        }
    prompt = encode(render(messages, body.get("tools")))
    answer = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(generated),
            "total_tokens": len(prompt) + len(generated),
        },
    }
    if body.get("return_token_ids"):  # as vLLM >= 0.10.2: the prompt's and the generation's token ids
        answer["prompt_token_ids"] = prompt
        choice["token_ids"] = generated
    return answer
