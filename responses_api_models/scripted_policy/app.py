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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import re
import time
import uuid
from collections import deque
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from prorl_gym.disconnect import CancelOnDisconnect
from prorl_gym.scripted import MODES, Step, call
from prorl_gym.wire.resources import ENVIRONMENT_RESTARTED
from responses_api_models.scripted_policy.chat_template import decode, encode, render, render_assistant
from responses_api_models.scripted_policy.real_tokens import RealTokens, drift_cases
from responses_api_models.scripted_policy.scripts import build_script

log = logging.getLogger(__name__)


def _first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _steps_done(messages: list[dict]) -> int:
    """Assistant turns whose tools ran: a turn one of whose tool answers says the environment was
    restarted under it may have lost its effect (a write in a killed kernel), so it is done again,
    as a model reading that answer would."""
    turns, lost = 0, set()
    for message in messages:
        if message.get("role") == "assistant":
            turns += 1
        elif message.get("role") == "tool" and ENVIRONMENT_RESTARTED in _text(message.get("content")):
            lost.add(turns)
    return turns - len(lost)


def _text(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


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
        self._coin: dict[str, int] = {}  # prompt -> conversations drawn in the coin mode
        # The "weights" it answers with (POST /weights, as a trainer loads new ones): once set, every answer's
        # text ends with WEIGHTS_MARK, so a test can tell which version produced which turn.
        self.weights_version: int | None = None
        self._draws = random.Random(0)  # which conversations are slow (metadata.scripted_slow)
        self._conversations: dict[tuple, int] = {}  # (stream, prompt) -> conversations started (scripted_slow)

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
        return mode if mode in (*MODES, COIN) else self.default_mode

    def latency_for(self, body: dict) -> float:
        """`metadata.scripted_latency_ms` (a slow generation for one row), else the server's default."""
        value = (body.get("metadata") or {}).get("scripted_latency_ms")
        try:
            return max(0.0, float(value) / 1000) if value is not None else self.latency_s
        except (TypeError, ValueError):
            return self.latency_s

    def slow_factor(self, body: dict, messages: list[dict]) -> float | None:
        """With `metadata.scripted_slow`, the factor by which this conversation is slow (drawn at its first
        turn, read back from its first reply's SLOW_MARK), else None."""
        slow = (body.get("metadata") or {}).get("scripted_slow")
        if isinstance(slow, str):
            slow = json.loads(slow)
        if not isinstance(slow, dict):
            return None
        replies = [_text(m.get("content")) for m in messages if m.get("role") == "assistant"]
        if replies:
            drawn = SLOW_MARK in replies[0]
        else:
            seed, key = slow.get("seed"), _key(_first_user_text(messages))
            counted = (slow.get("stream", seed), key)
            seen = self._conversations[counted] = self._conversations.get(counted, 0) + 1
            draws = self._draws if seed is None else random.Random(f"{seed}:{key}:{seen}")
            drawn = seen <= int(slow.get("first", 0)) or draws.random() < float(slow.get("p", 0.0))
        return float(slow.get("factor", 20.0)) if drawn else None

    def next_step(self, messages: list[dict], mode: str, tools: list[dict] | None = None) -> Step:
        names = {(t.get("function") or t).get("name") for t in tools or []}
        history = "".join(_text(m.get("content")) for m in messages if m.get("role") == "assistant")
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        return self.step_for(self.task_of(users), _steps_done(messages), mode, names, history)

    def task_of(self, texts: list[str]) -> str:
        """The user message that holds the task: the first one a script is known for (a harness may lead
        with its own, e.g. the Codex CLI's <environment_context>), else the first."""
        for text in texts:
            if _key(text) in self._rows or self._wrapped(_key(text), text) is not None:
                return text
        return texts[0] if texts else ""

    def step_for(
        self, first_user_text: str, turn: int, mode: str, tools: set[str] | None = None, history: str = ""
    ) -> Step:
        """What the script says at `turn` (0-based assistant turns) of the task with this first user message
        (or one that wraps it: a harness's own prompt around the task), with the tools the request offers.
        `history`: the conversation's earlier replies (the coin mode reads its draw there)."""
        key = _key(first_user_text)
        coin = None
        if mode == COIN:  # each new conversation of a prompt in turn gold, wrong, gold, ...: rewards that differ
            if turn == 0 or not (drawn := COIN_MARK.search(history)):
                coin = "gold" if self._coin.get(key, 0) % 2 == 0 else "wrong"
                self._coin[key] = self._coin.get(key, 0) + 1
            else:
                coin = drawn.group(1)
            mode = coin
        row = self._rows.get(key) or self._wrapped(key, first_user_text)
        if row is None:
            log.warning("scripted policy: no script for this prompt; answering that it has none")
            return Step(content="[scripted policy: no recorded actions for this task]")
        script = self._scripts.get((key, mode))
        if script is None:
            script = build_script(row, mode, tool_calls=self.tool_calls)
            if self.tool_aliases:
                script = [_aliased(step, self.tool_aliases) for step in script]
            self._scripts[(key, mode)] = script
        step = _as_instructed(script[min(turn, len(script) - 1)], first_user_text, tools or set())
        if self.weights_version is not None:
            step = Step(
                content=f"{step.content}{WEIGHTS_MARK.format(self.weights_version)}", tool_calls=step.tool_calls
            )
        if coin is not None and turn == 0:
            step = Step(content=f"{step.content} [sample: {coin}]", tool_calls=step.tool_calls)
        return step

    def _wrapped(self, key: str, text: str) -> dict | None:
        """The row whose first user message is inside `text` (the longest), remembered under its key."""
        inside = [
            row for row in self._rows.values() if _first_user_text(row["responses_create_params"]["input"]) in text
        ]
        if not inside:
            return None
        row = self._rows[key] = max(inside, key=lambda r: len(_first_user_text(r["responses_create_params"]["input"])))
        return row


# A harness that says how to submit (mini-swe-agent: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`) and offers
# no submit tool: a recorded `submit` is that command, run with its bash tool, as a model following the
# harness's instructions would.
SUBMIT_INSTRUCTION = re.compile(r"`(echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT[^`]*)`")
WEIGHTS_MARK = " [weights v{}]"
# metadata.scripted_mode "coin": a prompt's samples alternate gold and wrong (its first reply says which),
# so a group's rewards differ, as a real policy's do (dynamic sampling keeps such groups)
COIN = "coin"
COIN_MARK = re.compile(r"\[sample: (gold|wrong)\]")
# metadata.scripted_slow: said in the first reply of a conversation drawn slow, read back at its later turns
SLOW_MARK = "[pace: slow]"
# A harness whose run ends when the model answers without calling a tool (Claude Code): what it answers.
FINAL_ANSWER = "The fix is in place."


# A harness's shell tool under another name and argument (the Codex CLI's `exec_command` takes `cmd`): a recorded
# `bash` call is made with it when the harness offers no `bash`.
SHELL_TOOLS = {"exec_command": "cmd"}


def _as_instructed(step: Step, prompt: str, tools: set[str]) -> Step:
    """A recorded step as the harness at hand takes it: its tools by their own names (Claude Code's `Bash`,
    the Codex CLI's `exec_command`), a submission as its instructions say (a command, or a last answer without
    a tool call)."""
    if tools:  # recorded names matched to the offered ones regardless of case
        offered = {name.lower(): name for name in tools}
        step = Step(content=step.content, tool_calls=[_offered(c, offered) for c in step.tool_calls])
    if not any(c["name"] == "submit" for c in step.tool_calls) or "submit" in tools:
        return step
    if said := SUBMIT_INSTRUCTION.search(prompt):
        bash = offered.get("bash", "bash") if tools else "bash"
        calls = [call(bash, {"command": said.group(1)}) if c["name"] == "submit" else c for c in step.tool_calls]
        return Step(content=step.content, tool_calls=calls)
    if tools:  # tools offered, none to submit with, no instruction: the harness ends on an answer
        return Step(content=FINAL_ANSWER, tool_calls=[])
    return step


def _offered(recorded: dict, offered: dict[str, str]) -> dict:
    """A recorded call by the name the harness offers its tool under (and that tool's argument names)."""
    name = recorded["name"].lower()
    if name == "bash" and name not in offered:
        for tool, argument in SHELL_TOOLS.items():
            if tool in offered:
                try:
                    arguments = json.loads(recorded["arguments"])
                except ValueError:  # a malformed call stays malformed
                    return recorded | {"name": offered[tool]}
                renamed = {argument if key == "command" else key: value for key, value in arguments.items()}
                return call(offered[tool], renamed)
    return recorded | {"name": offered.get(name, recorded["name"])}


def _aliased(step: Step, aliases: dict[str, str]) -> Step:
    calls = [call | {"name": aliases.get(call["name"], call["name"])} for call in step.tool_calls]
    return Step(content=step.content, tool_calls=calls)


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
    # time spent answering (the policy's own share of a turn, for benchmarks), and requests by path
    # and the time it generated nothing at all (no generation in flight: a GPU sitting idle), for benchmarks;
    # generating_s: the integral of generations in flight (/ the peak: how much of a batching engine was used)
    busy: dict = {"requests": 0, "busy_s": 0.0, "paths": {}, "idle_s": 0.0, "uptime_s": 0.0, "aborted": 0}
    generating = {"n": 0, "idle_since": time.perf_counter(), "started": time.perf_counter(), "peak": 0}
    integral = {"s": 0.0, "at": time.perf_counter()}

    def advance(now: float) -> float:  # generating_s up to now
        integral["s"] += generating["n"] * (now - integral["at"])
        integral["at"] = now
        return integral["s"]

    def account(app):  # plain ASGI: a BaseHTTPMiddleware would add its own cost to what it measures
        async def timed(scope, receive, send):
            started = time.perf_counter()
            generation = scope["type"] == "http" and scope["path"] in GENERATIONS
            if generation:
                if generating["n"] == 0:
                    busy["idle_s"] += started - generating["idle_since"]
                advance(started)
                generating["n"] += 1
                generating["peak"] = max(generating["peak"], generating["n"])
            try:
                await app(scope, receive, send)
            finally:
                if generation:
                    advance(time.perf_counter())
                    generating["n"] -= 1
                    if generating["n"] == 0:
                        generating["idle_since"] = time.perf_counter()
                if scope["type"] == "http" and scope["path"] != "/stats":
                    busy["requests"] += 1
                    busy["busy_s"] += time.perf_counter() - started
                    busy["paths"][scope["path"]] = busy["paths"].get(scope["path"], 0) + 1

        return timed

    app.add_middleware(account)

    def aborted(path: str) -> None:  # a generation whose client went away (vLLM aborts it too)
        busy["aborted"] += 1

    app.add_middleware(CancelOnDisconnect, paths=GENERATIONS, on_abort=aborted)

    def generate_for(prompt: list[int], body: dict) -> list[int]:
        """What it generates after a token-id prompt (the conversation decoded once)."""
        c = tokens.conversation_of(prompt)
        task = policy.task_of(c.users)
        step = policy.step_for(task, c.turns, policy.mode_for(body), c.tools, c.text)
        return tokens.generate(step, c.thinking, drift_cases(task))

    @app.get("/stats")
    async def stats() -> dict:
        now = time.perf_counter()
        idle_now = now - generating["idle_since"] if generating["n"] == 0 else 0.0
        uptime = now - generating["started"]
        return busy | {
            "idle_s": busy["idle_s"] + idle_now,
            "uptime_s": uptime,
            "generating": generating["n"],
            "generating_s": advance(now),
            "peak_generating": generating["peak"],
        }

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
            return completion(body, messages, step)
        answer = real_chat_completion(tokens, body, messages, step)
        sampled.append({"route": "chat", "ids": answer["choices"][0]["token_ids"]})
        if not body.get("return_token_ids"):
            answer.pop("prompt_token_ids")
            answer["choices"][0].pop("token_ids")
        return answer

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
        generated, finish = _limited(generated, body.get("max_tokens"))
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
        generated, finish = _limited(generated, params.get("max_new_tokens"))
        sampled.append({"route": "generate", "ids": generated})
        logprobs = tokens.logprobs(generated)
        text = tokens.tokenizer.decode(generated)
        return {
            "text": text,
            "output_ids": generated,
            "meta_info": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(generated),
                "finish_reason": {"type": finish},
                "output_token_logprobs": [[lp, t, None] for lp, t in zip(logprobs, generated)],
            },
        }

    if plain:
        app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in VLLM_ONLY]
    return app


def _limited(ids: list[int], max_tokens: int | None) -> tuple[list[int], str]:
    if max_tokens and len(ids) > max_tokens:
        return ids[:max_tokens], "length"
    return ids, "stop"


def real_chat_completion(tokens: RealTokens, body: dict, messages: list[dict], step: Step) -> dict:
    """vLLM's chat route on a real template: re-rendered prompt, sampled ids, parsed message."""
    kwargs = body.get("chat_template_kwargs") or {}
    thinking = kwargs.get("enable_thinking", True) is not False
    prompt = tokens.chat_prompt(messages, body.get("tools"), kwargs)
    generated = tokens.generate(step, thinking, drift_cases(_first_user_text(messages)))
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    generated, finish = _limited(generated, max_tokens)
    message, parsed_finish = tokens.chat_message(generated, bool(body.get("tools")))
    choice: dict = {
        "index": 0,
        "message": message,
        "finish_reason": finish if finish == "length" else parsed_finish,
        "logprobs": None,
        "token_ids": generated,
    }
    if body.get("logprobs"):
        choice["logprobs"] = {"content": _logprob_entries(tokens, generated, body.get("return_tokens_as_token_ids"))}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "choices": [choice],
        "usage": _usage(prompt, generated),
        "prompt_token_ids": prompt,
    }


def token_completion(tokens: RealTokens, body: dict, prompt: list[int], generated: list[int], finish: str) -> dict:
    """vLLM's /v1/completions answer: text, legacy log-probs (token ids as `token_id:<id>`), token ids."""
    skip = body.get("skip_special_tokens", True)
    text = tokens.tokenizer.decode(generated)
    if skip:
        for end in tokens.tokenizer.end_ids:
            text = text.replace(tokens.tokenizer.token(end), "")
    choice: dict = {"index": 0, "text": text, "finish_reason": finish, "stop_reason": None, "logprobs": None}
    if body.get("logprobs") is not None:
        names = [
            f"token_id:{t}" if body.get("return_tokens_as_token_ids") else tokens.tokenizer.decode([t])
            for t in generated
        ]
        logprobs = tokens.logprobs(generated)
        choice["logprobs"] = {
            "tokens": names,
            "token_logprobs": logprobs,
            "top_logprobs": [{n: lp} for n, lp in zip(names, logprobs)],
            "text_offset": [0] * len(generated),
        }
    answer = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "choices": [choice],
        "usage": _usage(prompt, generated),
    }
    if body.get("return_token_ids"):
        choice["token_ids"] = generated
        answer["prompt_token_ids"] = prompt
    return answer


def _logprob_entries(tokens: RealTokens, ids: list[int], as_ids: bool) -> list[dict]:
    return [
        {
            "token": f"token_id:{t}" if as_ids else tokens.tokenizer.decode([t]),
            "logprob": lp,
            "bytes": list(tokens.tokenizer.decode([t]).encode()),
            "top_logprobs": [],
        }
        for t, lp in zip(ids, tokens.logprobs(ids))
    ]


def _usage(prompt: list[int], generated: list[int]) -> dict:
    return {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(generated),
        "total_tokens": len(prompt) + len(generated),
    }


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
