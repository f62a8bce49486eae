# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Before a stack starts: does the policy endpoint answer, serve the model, give token ids as asked?

A stack takes tens of seconds to minutes to start, and a policy that is not there is otherwise
found out only once rollouts wait for it. `check_policy` asks each endpoint, in seconds, what the
rollouts will ask of it:

1. `GET {base}/models`: something answers there and takes the key; the model is listed. A server
   without the route (llama.cpp, some hosted APIs) answers 404: step 2 checks the name then.
2. `POST {base}/chat/completions`, one token of a one-line prompt under that model name, with
   token ids asked for as the policy model server asks for them (per-token log-probs with
   `return_tokens_as_token_ids`) when they are on: it generates, and the ids come back. A llama.cpp
   server (`completion_api="llamacpp"`: a local model, once its launcher has loaded it) is asked as
   the model server asks it, at its root: the prompt tokenized by `/tokenize`, one token of
   `/completion` with the prompt as ids, the generated id and its log-prob back.

A failure raises PolicyCheckError with each request tried, what came back, and what to change.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import aiohttp

from prorl_gym.errors import ProrlError

FIX_URL = (
    "check the URL (scheme, host, port and the /v1 suffix, reachable from this machine) and that the server is running"
)
FIX_KEY = "set POLICY_API_KEY to a key the endpoint accepts"
FIX_TOKEN_IDS = (
    "training needs an endpoint that returns them (vLLM, SGLang); to evaluate this one, turn token ids off: "
    "make eval ... TOKEN_IDS=0 (python -m prorl_gym.evaluation --no-token-ids)"
)
# What the policy model server adds to a chat completion for token ids (NeMo Gym's vllm_model, client.py).
TOKEN_ID_FIELDS = {"logprobs": True, "top_logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True}


class PolicyCheckError(ProrlError):
    """The policy endpoint cannot serve the run as configured: what was tried and what to change."""


@dataclass
class PolicyCheck:
    base_urls: list[str]
    model: str
    token_ids: bool = True
    api_key: str | None = None  # default: $POLICY_API_KEY
    connect_timeout_s: float = 5.0
    answer_timeout_s: float = 60.0  # one token from a busy GPU server
    # how the policy model server asks for tokens: chat completions (vLLM, SGLang, hosted APIs), or
    # llama.cpp's /completion with token ids (balanced_vllm_model's completion_api: llamacpp)
    completion_api: Literal["chat", "llamacpp"] = "chat"


async def check_policy(check: PolicyCheck) -> list[str]:
    """One line per endpoint saying what passed; PolicyCheckError naming every endpoint that failed."""
    key = check.api_key if check.api_key is not None else os.environ.get("POLICY_API_KEY", "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = aiohttp.ClientTimeout(total=check.answer_timeout_s, sock_connect=check.connect_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
        results = await asyncio.gather(*(_check_one(http, url.rstrip("/"), check) for url in check.base_urls))
    failed = [said for ok, said in results if not ok]
    if failed:
        raise PolicyCheckError("the policy endpoint cannot serve this run:\n" + "\n".join(failed))
    return [said for _, said in results]


async def _check_one(http: aiohttp.ClientSession, base: str, check: PolicyCheck) -> tuple[bool, str]:
    started = time.monotonic()
    tried: list[str] = []

    def failed(fix: str) -> tuple[bool, str]:
        return False, "\n".join([f"  {base}:", *(f"    {line}" for line in tried), f"    fix: {fix}"])

    status, answer, said = await _request(http, "GET", f"{base}/models", None, check)
    tried.append(f"GET {base}/models: {said}")
    if status is None:
        return failed(FIX_URL)
    if status in (401, 403):
        return failed(FIX_KEY)
    listed = _model_ids(answer) if status == 200 else None
    if listed is not None and check.model not in listed:
        return failed(f"set the model name (MODEL=, --policy-model) to one it serves: {', '.join(listed) or 'none'}")

    if check.completion_api == "llamacpp":
        return await _check_llamacpp(http, base, check, tried, failed, started)
    body = {"model": check.model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
    body |= TOKEN_ID_FIELDS if check.token_ids else {}
    status, answer, said = await _request(http, "POST", f"{base}/chat/completions", body, check)
    asked = " with token ids" if check.token_ids else ""
    tried.append(f"POST {base}/chat/completions (model {check.model!r}, 1 token{asked}): {said}")
    if status is None:
        return failed(FIX_URL)
    if status in (401, 403):
        return failed(FIX_KEY)
    if status == 404 and "model" in str(answer).lower():
        return failed("set the model name (MODEL=, --policy-model) to one the endpoint serves")
    if status in (404, 405):
        return failed(f"{FIX_URL}: the base URL must be the OpenAI API root, where /chat/completions is")
    if status != 200 or not isinstance(answer, dict) or not answer.get("choices"):
        return failed("the endpoint must answer OpenAI chat completions for this model; see its own log")
    if check.token_ids and not _has_token_ids(answer):
        tried.append("the answer has no per-token log-probs with token ids")
        return failed(FIX_TOKEN_IDS)
    what = "gives token ids" if check.token_ids else "token ids off"
    return True, f"{base}: answers, serves {check.model!r}, {what} ({time.monotonic() - started:.2f}s)"


async def _check_llamacpp(
    http: aiohttp.ClientSession,
    base: str,
    check: PolicyCheck,
    tried: list[str],
    failed: Callable[[str], tuple[bool, str]],
    started: float,
) -> tuple[bool, str]:
    """Step 2 on llama.cpp's own routes, as responses_api_models/balanced_vllm_model/llamacpp.py uses them."""
    root = base.removesuffix("/v1")
    fix = "the endpoint must be llama.cpp's server (responses_api_models/llamacpp_policy); see its own log"
    body = {"content": "Say OK.", "add_special": False, "parse_special": True}
    status, answer, said = await _request(http, "POST", f"{root}/tokenize", body, check)
    tried.append(f"POST {root}/tokenize: {said}")
    if status is None:
        return failed(FIX_URL)
    ids = answer.get("tokens") if status == 200 and isinstance(answer, dict) else None
    if not ids or not all(isinstance(i, int) for i in ids):
        return failed(fix)
    body = {"prompt": ids, "n_predict": 1, "return_tokens": True, "n_probs": 1, "cache_prompt": False}
    status, answer, said = await _request(http, "POST", f"{root}/completion", body, check)
    tried.append(f"POST {root}/completion ({len(ids)} prompt ids, 1 token with its id and log-prob): {said}")
    if status is None:
        return failed(FIX_URL)
    generated = answer.get("tokens") if status == 200 and isinstance(answer, dict) else None
    probs = (answer.get("completion_probabilities") or [{}]) if generated else [{}]
    if not generated or probs[0].get("id") != generated[0] or "logprob" not in probs[0]:
        tried.append("the answer has no generated id with its log-prob")
        return failed(fix)
    return True, f"{base}: answers, serves {check.model!r}, gives token ids ({time.monotonic() - started:.2f}s)"


async def _request(
    http: aiohttp.ClientSession, method: str, url: str, body: dict | None, check: PolicyCheck
) -> tuple[int | None, object, str]:
    """(status, JSON answer or text, what to say of it); status None: no answer at all."""
    try:
        async with http.request(method, url, json=body) as response:
            raw = await response.read()
    except aiohttp.ClientConnectorError as exc:
        return None, None, f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    except (TimeoutError, aiohttp.ServerTimeoutError):
        limits = f"{check.connect_timeout_s:.0f}s to connect, {check.answer_timeout_s:.0f}s in all"
        return None, None, f"no answer within {limits}"
    except aiohttp.ClientError as exc:
        return None, None, f"failed: {exc!r}"
    text = raw.decode(errors="replace")
    try:
        answer: object = json.loads(raw)
    except ValueError:
        answer = text
    return response.status, answer, f"HTTP {response.status}" + (f": {text[:300]}" if response.status >= 400 else "")


def _model_ids(answer: object) -> list[str] | None:
    if isinstance(answer, dict) and isinstance(answer.get("data"), list):
        return [str(m.get("id")) for m in answer["data"] if isinstance(m, dict)]
    return None


def _has_token_ids(answer: dict) -> bool:
    content = ((answer["choices"][0] or {}).get("logprobs") or {}).get("content")
    return bool(content) and str(content[0].get("token", "")).startswith("token_id:")
