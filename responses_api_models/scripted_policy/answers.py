# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy's answers, as each server family writes them: OpenAI chat completions (byte-level
tokens, or a real template's with vLLM's token ids and log-probs), vLLM's token-in/token-out
/v1/completions and SGLang's /generate. app.py routes requests to them.
"""

from __future__ import annotations

import time
import uuid

from prorl_gym.scripted import Step
from responses_api_models.scripted_policy.chat_template import decode, encode, render, render_assistant
from responses_api_models.scripted_policy.real_tokens import RealTokens, drift_cases
from responses_api_models.scripted_policy.replay import first_user_text


def limited(ids: list[int], max_tokens: int | None) -> tuple[list[int], str]:
    if max_tokens and len(ids) > max_tokens:
        return ids[:max_tokens], "length"
    return ids, "stop"


def real_chat_completion(tokens: RealTokens, body: dict, messages: list[dict], step: Step) -> dict:
    """vLLM's chat route on a real template: re-rendered prompt, sampled ids, parsed message."""
    kwargs = body.get("chat_template_kwargs") or {}
    thinking = kwargs.get("enable_thinking", True) is not False
    prompt = tokens.chat_prompt(messages, body.get("tools"), kwargs)
    generated = tokens.generate(step, thinking, drift_cases(first_user_text(messages)))
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    generated, finish = limited(generated, max_tokens)
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


def sglang_answer(tokens: RealTokens, prompt: list[int], generated: list[int], finish: str) -> dict:
    """SGLang's /generate answer: text, output ids and their log-probs."""
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


def byte_chat_completion(body: dict, messages: list[dict], step: Step) -> dict:
    """vLLM's chat route on the byte-level template (chat_template.py): ids, log-probs, message."""
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
