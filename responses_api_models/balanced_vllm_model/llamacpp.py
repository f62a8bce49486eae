# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""llama.cpp's server as a token-in/token-out policy endpoint (`completion_api: llamacpp`).

- The prompt: llama.cpp's `/apply-template` renders the model's own chat template (tools included) and
  `/tokenize` (special tokens parsed, none added) turns it into ids; a later turn's new messages are
  rendered after a stand-in ended assistant turn (prorl_gym/tokens/prompt.py's bridge, found in the
  tokens' pieces as on vLLM's /tokenize).
- The generation: `POST /completion` with the prompt as ids, `return_tokens` (the generated ids, the
  end-of-turn token included) and `n_probs: 1` (each generated token's log-prob, with its id, checked
  against the generated ids). The sampler is set so the log-probs are the policy's: llama.cpp's
  server truncates by default (top_k 40, top_p 0.95, min_p 0.05, temperature 0.8); here top_k 0, top_p 1,
  min_p 0 and temperature 1 unless the request sets them. `logprobs: model` (default) records the
  model's own distribution (as vLLM returns and a trainer scores); `sampled` records the distribution
  after llama.cpp's sampler chain (temperature, truncation, a grammar), i.e. what was sampled from.
- A grammar (prorl_gym/tokens/grammar.py) goes along when the turn's tool calls are constrained.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from prorl_gym.errors import ProrlError
from prorl_gym.tokens.prompt import bridge_from_tokens, bridge_messages
from responses_api_models.balanced_vllm_model.client import EndpointClient

LogProbs = Literal["model", "sampled"]
# The chat request's sampling keys as llama.cpp's /completion names them; llama.cpp's own defaults
# truncate, so the policy's (vLLM's) defaults are sent when the request has none.
NAMES = {
    "max_tokens": "n_predict",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "repetition_penalty": "repeat_penalty",
    "ignore_eos": "ignore_eos",
}
POLICY_DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
CONTEXT_ERROR = "exceed_context_size_error"  # llama.cpp's error type for a prompt longer than its context


class UnsupportedSampling(ProrlError, ValueError):
    """A sampling parameter llama.cpp's /completion cannot honour (said, never dropped)."""


def completion_body(ids: list[int], params: dict[str, Any], logprobs: LogProbs, grammar: str | None) -> dict:
    if unknown := sorted(set(params) - set(NAMES)):
        raise UnsupportedSampling(f"llama.cpp's /completion has no equivalent of {unknown}")
    body = POLICY_DEFAULTS | {NAMES[k]: v for k, v in params.items()}
    if body["top_k"] is not None and body["top_k"] < 0:  # vLLM's "off" is -1, llama.cpp's 0
        body["top_k"] = 0
    body |= {"prompt": ids, "return_tokens": True, "n_probs": 1, "cache_prompt": True}
    if logprobs == "sampled":
        body["post_sampling_probs"] = True
    if grammar:
        body["grammar"] = grammar
    return body


def read_completion(answer: dict, logprobs: LogProbs) -> tuple[list[int], list[float], str, str]:
    """(generated ids, their log-probs, the text, finish reason) of a /completion answer."""
    generated = [int(t) for t in answer.get("tokens") or []]
    entries = answer.get("completion_probabilities") or []
    if len(entries) != len(generated) or any(int(e.get("id", -1)) != t for e, t in zip(entries, generated)):
        raise ValueError(
            f"llama.cpp returned {len(entries)} log-probs for {len(generated)} generated ids, or other ids "
            "(return_tokens, n_probs)"
        )
    if logprobs == "sampled":
        values = [math.log(e["prob"]) if e["prob"] > 0 else float("-inf") for e in entries]
    else:
        values = [float(e["logprob"]) for e in entries]
    finish = "length" if answer.get("stop_type") == "limit" or answer.get("truncated") else "stop"
    return generated, values, answer.get("content") or "", finish


class LlamaCppTokens:
    """A TokenSource (prorl_gym/tokens/prompt.py) on llama.cpp's /apply-template and /tokenize: the model's
    own template rendered by the server, tokenized with special tokens parsed and none added (the template
    writes its own BOS); a later turn's new messages after a stand-in turn, found by the marker in the
    tokens' pieces, as EndpointTokens does on vLLM's /tokenize."""

    def __init__(self, client: EndpointClient, end_tokens: list[str], ends: dict[str, frozenset]):
        self.client, self.end_tokens = client, end_tokens
        self._ends = ends  # per endpoint URL, shared across calls: resolved once

    async def end_ids(self) -> frozenset[int]:
        key = self.client.base_url
        if key not in self._ends:
            ids = [[t for t, _ in await self.tokenize(text)] for text in self.end_tokens]
            if any(len(i) != 1 for i in ids):
                raise ValueError(f"end_tokens {self.end_tokens} are not single tokens on {key}: {ids}")
            self._ends[key] = frozenset(i[0] for i in ids)
        return self._ends[key]

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        return [t for t, _ in await self.tokenize(await self.render(messages, tools, kwargs))]

    async def after_turn(
        self, turn: dict, messages: list[dict], tools: list[dict] | None, kwargs: dict
    ) -> tuple[int, list[int]]:
        pieces = await self.tokenize(await self.render(bridge_messages(turn, messages), tools, kwargs))
        return bridge_from_tokens([t for t, _ in pieces], [p for _, p in pieces], await self.end_ids())

    async def render(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> str:
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        return (await self.client.create_at_root("/apply-template", body))["prompt"]

    async def tokenize(self, text: str) -> list[tuple[int, str]]:
        """(id, piece) of each token; a piece that is not whole UTF-8 comes as its bytes."""
        body = {"content": text, "add_special": False, "parse_special": True, "with_pieces": True}
        tokens = (await self.client.create_at_root("/tokenize", body))["tokens"]
        return [(int(t["id"]), _piece(t["piece"])) for t in tokens]


def _piece(piece: str | list[int]) -> str:
    return piece if isinstance(piece, str) else bytes(piece).decode("utf-8", errors="replace")
