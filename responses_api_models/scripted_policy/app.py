# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy's HTTP server: OpenAI chat completions, vLLM's /tokenize and /detokenize, and
with a real tokenizer (real_tokens.py) vLLM's token-id /v1/completions and SGLang's /generate.

STAND-IN for a GPU model. It replays recorded actions (see scripts.py) for the task whose
first user message it recognises, and returns token ids and log-probs the way vLLM does
(`logprobs` with `return_tokens_as_token_ids`), so NeMo Gym's `vllm_model` with
`return_token_id_information: true` works against it unchanged.

Mode per request: `metadata.scripted_mode`, else the model name `scripted-<mode>`, else
the server default. Latency per request: `metadata.scripted_latency_ms`, else `--latency-ms`;
`metadata.scripted_slow: {"p": 0.05, "factor": 20}` makes a conversation slow with probability p
(drawn at its first turn, said in its first reply, every turn `factor` times the latency): a
heavy-tailed workload, as SWE trials are; with `"seed": s` the draw of a prompt's n-th conversation
depends on (s, the prompt, n) only, conversations counted per `"stream"` (default: the seed), so runs
with the same seed and streams of their own meet the same stragglers; `"first": n`
makes the first n conversations of the prompt slow (a straggler a test can count on). A generation whose client goes away is aborted, as vLLM
does, and counted (`/stats` `aborted`).

In parts: replay.py (which recorded step a conversation is at), answers.py (each server family's
answer), this module (the routes and the meter of time spent generating).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from prorl_gym.disconnect import CancelOnDisconnect
from prorl_gym.scripted import MODES, Step
from responses_api_models.scripted_policy.answers import (
    byte_chat_completion,
    limited,
    real_chat_completion,
    sglang_answer,
    token_completion,
)
from responses_api_models.scripted_policy.chat_template import decode, encode, render
from responses_api_models.scripted_policy.real_tokens import RealTokens, drift_cases
from responses_api_models.scripted_policy.replay import SLOW_MARK, ScriptedPolicy

# The routes that generate (what a GPU would be busy with).
GENERATIONS = ("/v1/chat/completions", "/v1/completions", "/generate")
# The routes a plain OpenAI-compatible server (a hosted API, llama.cpp, Ollama) does not have.
VLLM_ONLY = ("/v1/models", "/tokenize", "/detokenize", "/v1/completions", "/generate", "/sampled")


def create_app(policy: ScriptedPolicy, tokens: RealTokens | None = None, plain: bool = False) -> FastAPI:
    """tokens: a real model's tokenizer and template (real_tokens.py); by default the byte-level ones.
    plain: answer as an OpenAI-compatible server that is not vLLM: chat completions only, no log-probs
    or token ids whatever the request asks, none of vLLM's other routes (404)."""
    app = FastAPI(title="scripted policy (stand-in for a GPU model)")
    sampled: deque[dict] = deque(maxlen=4096)  # what was generated, newest last: tests compare records with it
    meter = _Meter()
    app.add_middleware(meter.account)
    app.add_middleware(CancelOnDisconnect, paths=GENERATIONS, on_abort=meter.aborted)
    _add_state_routes(app, policy, meter, sampled)
    _add_tokenizer_routes(app, tokens)
    _add_chat_route(app, policy, tokens, sampled, plain)
    _add_token_routes(app, policy, tokens, sampled)
    if plain:
        app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in VLLM_ONLY]
    return app


class _Meter:
    """Time spent answering (the policy's own share of a turn, for benchmarks), requests by path, and the
    time it generated nothing at all (no generation in flight: a GPU sitting idle); generating_s: the
    integral of generations in flight (/ the peak: how much of a batching engine was used)."""

    def __init__(self):
        self.busy: dict = {"requests": 0, "busy_s": 0.0, "paths": {}, "idle_s": 0.0, "uptime_s": 0.0, "aborted": 0}
        self.generating = {"n": 0, "idle_since": time.perf_counter(), "started": time.perf_counter(), "peak": 0}
        self.integral = {"s": 0.0, "at": time.perf_counter()}

    def advance(self, now: float) -> float:  # generating_s up to now
        self.integral["s"] += self.generating["n"] * (now - self.integral["at"])
        self.integral["at"] = now
        return self.integral["s"]

    def account(self, app):  # plain ASGI: a BaseHTTPMiddleware would add its own cost to what it measures
        busy, generating = self.busy, self.generating

        async def timed(scope, receive, send):
            started = time.perf_counter()
            generation = scope["type"] == "http" and scope["path"] in GENERATIONS
            if generation:
                if generating["n"] == 0:
                    busy["idle_s"] += started - generating["idle_since"]
                self.advance(started)
                generating["n"] += 1
                generating["peak"] = max(generating["peak"], generating["n"])
            try:
                await app(scope, receive, send)
            finally:
                if generation:
                    self.advance(time.perf_counter())
                    generating["n"] -= 1
                    if generating["n"] == 0:
                        generating["idle_since"] = time.perf_counter()
                if scope["type"] == "http" and scope["path"] != "/stats":
                    busy["requests"] += 1
                    busy["busy_s"] += time.perf_counter() - started
                    busy["paths"][scope["path"]] = busy["paths"].get(scope["path"], 0) + 1

        return timed

    def aborted(self, path: str) -> None:  # a generation whose client went away (vLLM aborts it too)
        self.busy["aborted"] += 1

    def stats(self) -> dict:
        now = time.perf_counter()
        idle_now = now - self.generating["idle_since"] if self.generating["n"] == 0 else 0.0
        uptime = now - self.generating["started"]
        return self.busy | {
            "idle_s": self.busy["idle_s"] + idle_now,
            "uptime_s": uptime,
            "generating": self.generating["n"],
            "generating_s": self.advance(now),
            "peak_generating": self.generating["peak"],
        }


def _add_state_routes(app: FastAPI, policy: ScriptedPolicy, meter: _Meter, sampled: deque[dict]) -> None:
    """/stats, /health, /v1/models, /weights and /sampled: what the server is, has done and answers with."""

    @app.get("/stats")
    async def stats() -> dict:
        return meter.stats()

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": f"scripted-{m}", "object": "model"} for m in MODES]}

    @app.post("/weights")
    async def load_weights(request: Request) -> dict:
        """Stand-in for a weight update: from now on its answers say this version (WEIGHTS_MARK)."""
        version = (await request.json()).get("version")  # null: answer as before any was set
        policy.weights_version = int(version) if version is not None else None
        return {"version": policy.weights_version}

    @app.get("/sampled")
    async def sampled_ids() -> list[dict]:
        return list(sampled)


def _add_tokenizer_routes(app: FastAPI, tokens: RealTokens | None) -> None:
    """vLLM's /tokenize and /detokenize, with the real tokenizer or the byte-level one."""

    @app.post("/tokenize")
    async def tokenize(request: Request) -> dict:
        body = await request.json()
        if tokens is not None:
            return tokens.tokenize(body)
        ids = encode(render(body.get("messages", []), body.get("tools")))
        return {"count": len(ids), "max_model_len": 1 << 20, "tokens": ids}

    @app.post("/detokenize")
    async def detokenize(request: Request) -> dict:
        ids = (await request.json()).get("tokens") or []
        return {"prompt": tokens.tokenizer.decode(ids) if tokens is not None else decode(ids)}


def _add_chat_route(
    app: FastAPI, policy: ScriptedPolicy, tokens: RealTokens | None, sampled: deque[dict], plain: bool
) -> None:
    """OpenAI's chat completions, as vLLM answers them (or, plain, as a server that is not vLLM)."""

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return JSONResponse(
                status_code=400, content={"object": "error", "message": "messages must be a non-empty list"}
            )
        latency_s, slow = policy.latency_for(body), policy.slow_factor(body, messages)
        if latency_s:
            await asyncio.sleep(latency_s * (slow or 1.0))
        step = policy.next_step(messages, policy.mode_for(body), body.get("tools"))
        if slow and not any(m.get("role") == "assistant" for m in messages):
            step = Step(content=f"{step.content} {SLOW_MARK}".strip(), tool_calls=step.tool_calls)
        if plain:  # no log-probs, no token ids: what a server that is not vLLM answers
            body = {k: v for k, v in body.items() if k not in ("logprobs", "return_token_ids")}
        if tokens is None:
            return byte_chat_completion(body, messages, step)
        answer = real_chat_completion(tokens, body, messages, step)
        sampled.append({"route": "chat", "ids": answer["choices"][0]["token_ids"]})
        if not body.get("return_token_ids"):
            answer.pop("prompt_token_ids")
            answer["choices"][0].pop("token_ids")
        return answer


def _add_token_routes(app: FastAPI, policy: ScriptedPolicy, tokens: RealTokens | None, sampled: deque[dict]) -> None:
    """Token ids in, token ids out: vLLM's /v1/completions and SGLang's /generate (a real tokenizer only)."""

    def generate_for(prompt: list[int], body: dict) -> list[int]:
        """What it generates after a token-id prompt (the conversation decoded once)."""
        c = tokens.conversation_of(prompt)
        task = policy.task_of(c.users)
        step = policy.step_for(task, c.turns, policy.mode_for(body), c.tools, c.text)
        return tokens.generate(step, c.thinking, drift_cases(task))

    @app.post("/v1/completions")
    async def completions(request: Request):
        """vLLM's completion route with a token-id prompt (token-in/token-out): a real tokenizer only."""
        body = await request.json()
        prompt = body.get("prompt")
        if tokens is None or not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            return JSONResponse(status_code=400, content={"object": "error", "message": "prompt must be token ids"})
        latency_s = policy.latency_for(body)
        if latency_s:
            await asyncio.sleep(latency_s)
        generated = generate_for(prompt, body)
        generated, finish = limited(generated, body.get("max_tokens"))
        sampled.append({"route": "completions", "ids": generated})
        return token_completion(tokens, body, prompt, generated, finish)

    @app.post("/generate")
    async def generate(request: Request):
        """SGLang's native route: input_ids in, output ids and log-probs out."""
        body = await request.json()
        prompt = body.get("input_ids")
        if tokens is None or not isinstance(prompt, list) or not prompt:
            return JSONResponse(status_code=400, content={"error": "input_ids must be token ids"})
        params = body.get("sampling_params") or {}
        generated = generate_for(prompt, body)
        generated, finish = limited(generated, params.get("max_new_tokens"))
        sampled.append({"route": "generate", "ids": generated})
        return sglang_answer(tokens, prompt, generated, finish)
