# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Token-in/token-out: the policy call as token ids, so the ids in a record are the ones the model saw
and produced.

`token_mode: chat` (the default) is vllm_model's chat route: the endpoint re-renders the whole
conversation every turn, which is exact only where the server repairs its prompt (NeMo RL's patched
vLLM). `token_mode: tito` sends the prompt as token ids (prorl_gym/tokens/prompt.py: the previous
turn's ids, exactly, then the new messages) to the endpoint's completion route (vLLM
`/v1/completions` with a token-id prompt, SGLang `/generate` with `input_ids`, or llama.cpp's `/completion`
with a token-id prompt: llamacpp.py), reads the raw
generation back into reasoning, content and tool calls itself (prorl_gym/tokens/parsers.py: the
model family's parsers, chosen in config), and returns a chat completion whose message carries the
prompt ids, the generated ids and their log-probs as vllm_model's does. Templates are rendered and
text tokenized by the endpoint (`tokenizer: endpoint`, vLLM's /tokenize, without special tokens) or
here, from a tokenizer's files (`tokenizer: qwen3`, a family of prorl_gym/tokens/families.py, or a
directory). With local files the server refuses to start when the tool parser does not read the
template's call syntax (parsers.check_template) or when the bridge differs from whole renders
(bridge.check); tool-call ids take the form the template accepts.

A generation cut by max_tokens is not read for calls: a call cut mid-value must not run. The turn keeps
finish_reason "length", its text is the content, and `prorl_cut` says why (the response's metadata).

Tool calls: each call of a turn is said to have come by one path, in the response's metadata
(`prorl_tool_calls`, one path per call, in order) and in `/metrics`: `tagged` (the model's own format,
read by the family's parser), `constrained` (tagged, under a grammar built from the request's tool
schemas: `tool_call_grammar`, llama.cpp only), or `lenient_fenced` / `lenient_bare` / `lenient_unbraced` /
`lenient_malformed` (JSON written without the tags, read by prorl_gym/tokens/lenient.py where
`lenient_tool_calls` is on; never in a generation cut by max_tokens).

In both modes every turn is counted (`prorl_token_prompts_total{mode, kind}`): in tito, how its prompt
was made (rendered: a first turn; extended: the previous ids; rerendered: a conversation whose last
assistant turn carried no ids, rendered whole); in chat, whether the endpoint's prompt extended the
previous turn's ids (extended) or drifted from them (drifted).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, model_validator

from prorl_gym.tokens.bridge import MARK, call_id
from prorl_gym.tokens.grammar import tool_call_grammar
from prorl_gym.tokens.lenient import read_untagged
from prorl_gym.tokens.parsers import ReasoningParser, ToolParser, check_template, parse
from prorl_gym.tokens.prompt import (
    LocalTokens,
    Prompt,
    TokenSource,
    bridge_from_tokens,
    bridge_messages,
    turn_prompt,
)
from prorl_gym.tokens.tokenizer import load
from responses_api_models.balanced_vllm_model.client import EndpointClient
from responses_api_models.balanced_vllm_model.llamacpp import (
    LlamaCppTokens,
    LogProbs,
    completion_body,
    read_completion,
)

# What a completion request carries over from the chat request (sampling, limits); the rest is chat-only.
SAMPLING_KEYS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
)
SGLANG_NAMES = {"max_tokens": "max_new_tokens"}


class TokenModeSettings(BaseModel):
    token_mode: Literal["chat", "tito"] = "chat"
    # tito: where templates are rendered and text tokenized: the endpoint's /tokenize, or local files
    # ("qwen3", or a family make setup lays out: qwen3_coder, qwen3_5, llama3, deepseek_v31, gpt_oss; or a
    # directory with tokenizer.json, tokenizer_config.json with its chat_template, and generation_config.json).
    tokenizer: str = "endpoint"
    # tito with tokenizer: endpoint: the tokens that end a turn, the template's own first (the model's
    # generation_config.json eos ids and the template's turn end).
    end_tokens: list[str] = ["<|im_end|>", "<|endoftext|>"]
    tool_parser: ToolParser = "hermes"
    reasoning_parser: ReasoningParser = "think"
    completion_api: Literal["vllm", "sglang", "llamacpp"] = "vllm"
    # llamacpp: the log-probs recorded: the model's own distribution (as vLLM returns them), or the one
    # sampled from after llama.cpp's sampler chain (temperature, truncation, a grammar).
    logprobs: LogProbs = "model"
    # Constrained tool calls (llamacpp): "request" when the request's tool_choice is "required" or names a
    # function (as vLLM's structured outputs); "always" on every turn that offers tools (tool_choice
    # "none" excepted); "off" never. One call a turn: a small model allowed several writes the same call
    # again and again until its token limit (seen with Qwen2.5-Coder-0.5B).
    tool_call_grammar: Literal["off", "request", "always"] = "off"
    # Read calls written without their tags (prorl_gym/tokens/lenient.py) when a turn has no tagged call.
    lenient_tool_calls: bool = False

    @model_validator(mode="after")
    def _grammar_needs_llamacpp(self):
        if self.tool_call_grammar != "off" and self.completion_api != "llamacpp":
            raise ValueError("tool_call_grammar needs completion_api: llamacpp (its grammars are llama.cpp's GBNF)")
        return self


class EndpointTokens:
    """A TokenSource on the policy endpoint itself (vLLM's /tokenize, with the token strings). Nothing is
    added around the text: vLLM adds special tokens (BOS) unless told `add_special_tokens: false`."""

    def __init__(self, client: EndpointClient, model: str, end_tokens: list[str], ends: dict[str, frozenset]):
        self.client, self.model, self.end_tokens = client, model, end_tokens
        self._ends = ends  # per endpoint URL, shared across calls: resolved once

    async def end_ids(self) -> frozenset[int]:
        key = self.client.base_url
        if key not in self._ends:
            ids = [
                (await self.client.create_tokenize(model=self.model, prompt=t, add_special_tokens=False))["tokens"]
                for t in self.end_tokens
            ]
            if any(len(i) != 1 for i in ids):
                raise ValueError(f"end_tokens {self.end_tokens} are not single tokens on {key}: {ids}")
            self._ends[key] = frozenset(i[0] for i in ids)
        return self._ends[key]

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        return (await self._tokenize(messages, tools, kwargs))["tokens"]

    async def after_turn(
        self, turn: dict, messages: list[dict], tools: list[dict] | None, kwargs: dict
    ) -> tuple[int, list[int]]:
        answer = await self._tokenize(bridge_messages(turn, messages), tools, kwargs, return_token_strs=True)
        if MARK not in "".join(answer.get("token_strs") or []):
            raise ValueError("the endpoint's /tokenize returned no token strings (return_token_strs)")
        return bridge_from_tokens(answer["tokens"], answer["token_strs"], await self.end_ids())

    async def _tokenize(self, messages, tools, kwargs, **extra) -> dict:
        body = {"model": self.model, "messages": messages, "add_generation_prompt": True, **extra}
        body["add_special_tokens"] = False
        if tools:
            body["tools"] = tools
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        return await self.client.create_tokenize(**body)


class TokenInTokenOut:
    """One tito policy call: the prompt's ids, the completion route, the generation read back."""

    def __init__(self, settings: TokenModeSettings, model: str, converter_reasoning: bool):
        """With a local tokenizer, proves the parser and the bridge against its template (ParserMismatch,
        BridgeMismatch: the server does not start, and says why)."""
        self.settings, self.model = settings, model
        self.reasoning: ReasoningParser = settings.reasoning_parser if converter_reasoning else "none"
        self._local, self.id_form = None, "openai"
        if settings.tokenizer != "endpoint":
            tokenizer = load(settings.tokenizer)
            if tokenizer.template is not None:
                check_template(settings.tool_parser, tokenizer.template.source, f"{settings.tokenizer}'s template")
            self._local = LocalTokens(tokenizer)
            self.id_form = self._local.check().id_form
        self._ends: dict[str, frozenset] = {}

    def source(self, client: EndpointClient) -> TokenSource:
        if self._local is not None:
            return self._local
        if self.settings.completion_api == "llamacpp":
            return LlamaCppTokens(client, self.settings.end_tokens, self._ends)
        return EndpointTokens(client, self.model, self.settings.end_tokens, self._ends)

    async def prompt(self, client: EndpointClient, body: dict[str, Any]) -> Prompt:
        kwargs = dict(body.get("chat_template_kwargs") or {})
        return await turn_prompt(self.source(client), body["messages"], body.get("tools"), kwargs)

    async def complete(self, client: EndpointClient, body: dict[str, Any], prompt: Prompt) -> dict:
        """The chat completion (as a dict) of one generation from `prompt`'s ids; `prorl_tool_calls` in it
        names the path of each call (the model server moves it into the response's metadata)."""
        params = {k: body[k] for k in SAMPLING_KEYS if body.get(k) is not None}
        if "max_tokens" not in params and body.get("max_completion_tokens"):
            params["max_tokens"] = body["max_completion_tokens"]
        grammar = self._grammar(body)
        if self.settings.completion_api == "sglang":
            generated, log_probs, text, finish = await self._sglang(client, prompt.ids, params)
        elif self.settings.completion_api == "llamacpp":
            request = completion_body(prompt.ids, params, self.settings.logprobs, grammar)
            answer = await client.create_at_root("/completion", request)
            generated, log_probs, text, finish = read_completion(answer, self.settings.logprobs)
        else:  # the request's metadata goes along, as vllm_model's chat route sends it (vLLM ignores it)
            metadata = {"metadata": body["metadata"]} if body.get("metadata") else {}
            generated, log_probs, text, finish = await self._vllm(client, prompt.ids, params | metadata)
        ends = await self.source(client).end_ids()
        return self.reply(body, prompt, generated, log_probs, text, finish, ends, constrained=grammar is not None)

    def reply(
        self,
        body: dict[str, Any],
        prompt: Prompt,
        generated: list[int],
        log_probs: list[float],
        text: str,
        finish: str,
        ends: frozenset[int],
        constrained: bool = False,
    ) -> dict:
        """The generation read back (parsers, the cut rule, calls without tags where lenient_tool_calls) as the
        chat completion the agent gets; `constrained`: generated under a tool-call grammar."""
        text = _without_end(text, self._end_texts(ends))
        tools = self.settings.tool_parser if body.get("tools") else "none"
        schemas = {t["function"]["name"]: t["function"].get("parameters") for t in _functions(body.get("tools"))}
        turn = parse(text, tools, self.reasoning, tool_schemas=schemas, token_ids=generated)
        cut = None
        if finish == "length" and turn.tool_calls:  # a call cut by max_tokens must not run: the text is the answer
            cut = f"max_tokens reached inside a tool call ({turn.tool_calls[-1]['name'] or 'unnamed'}): not executed"
            turn = parse(text, "none", self.reasoning, token_ids=generated)
            if self.reasoning == "openai":  # harmony's parser gives no text for a call: keep the raw text
                turn.content = turn.content or text
        paths = ["constrained" if constrained else "tagged"] * len(turn.tool_calls)
        lenient = self.settings.lenient_tool_calls and body.get("tools") and finish != "length"  # (the cut rule)
        if lenient and not turn.tool_calls and cut is None:
            turn.content, found = read_untagged(turn.content)
            turn.tool_calls, paths = [c.function() for c in found], [f"lenient_{c.form}" for c in found]
        content = (f"<think>{turn.reasoning}</think>" if turn.reasoning is not None else "") + turn.content
        calls = [{"id": call_id(self.id_form), "type": "function", "function": c} for c in turn.tool_calls]
        message = {
            "role": "assistant",
            "content": content or None,
            "tool_calls": calls or None,
            "prompt_token_ids": prompt.ids,
            "generation_token_ids": generated,
            "generation_log_probs": log_probs,
        }
        return {
            "prorl_cut": cut,
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else finish}],
            "usage": {
                "prompt_tokens": len(prompt.ids),
                "completion_tokens": len(generated),
                "total_tokens": len(prompt.ids) + len(generated),
            },
            "prorl_tool_calls": paths,
        }

    def _grammar(self, body: dict[str, Any]) -> str | None:
        """The grammar constraining this turn to a tool call, if it is to be constrained."""
        mode, tools, choice = self.settings.tool_call_grammar, body.get("tools"), body.get("tool_choice")
        if mode == "off" or not tools or choice == "none":
            return None
        named = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
        if mode == "request" and choice != "required" and named is None:
            return None
        return tool_call_grammar(tools, only=named, parallel=False)

    def _end_texts(self, ends: frozenset[int]) -> list[str]:
        if self._local is not None:
            return [self._local.tokenizer.token(i) for i in ends]
        return self.settings.end_tokens

    async def _vllm(
        self, client: EndpointClient, ids: list[int], params: dict
    ) -> tuple[list[int], list[float], str, str]:
        answer = await client.create_completion(
            model=self.model,
            prompt=ids,
            logprobs=0,
            return_tokens_as_token_ids=True,
            return_token_ids=True,
            skip_special_tokens=False,
            **params,
        )
        choice = answer["choices"][0]
        logprobs = choice.get("logprobs") or {}
        generated = choice.get("token_ids")
        if generated is None:  # vLLM < 0.10.2: the ids only as `token_id:<id>` log-prob tokens
            generated = [int(str(t).removeprefix("token_id:")) for t in logprobs.get("tokens") or []]
        log_probs = logprobs.get("token_logprobs")
        if log_probs is None or len(log_probs) != len(generated):
            raise ValueError("the completion route returned no per-token log-probs for the generated ids")
        return [int(t) for t in generated], [float(lp) for lp in log_probs], choice.get("text") or "", _finish(choice)

    async def _sglang(
        self, client: EndpointClient, ids: list[int], params: dict
    ) -> tuple[list[int], list[float], str, str]:
        sampling = {SGLANG_NAMES.get(k, k): v for k, v in params.items()} | {"skip_special_tokens": False}
        answer = await client.create_generate(input_ids=ids, sampling_params=sampling, return_logprob=True)
        meta = answer.get("meta_info") or {}
        entries = meta.get("output_token_logprobs") or []
        generated = [int(e[1]) for e in entries] if entries else [int(t) for t in answer.get("output_ids") or []]
        if len(entries) != len(generated):
            raise ValueError("SGLang returned no per-token log-probs for the generated ids (return_logprob)")
        finish = (meta.get("finish_reason") or {}).get("type") or "stop"
        return (
            generated,
            [float(e[0]) for e in entries],
            answer.get("text") or "",
            "length" if finish == "length" else "stop",
        )


def _functions(tools: list[dict] | None) -> list[dict]:
    return [t if "function" in t else {"function": t} for t in tools or [] if (t.get("function") or t).get("name")]


def _finish(choice: dict) -> str:
    return "length" if choice.get("finish_reason") == "length" else "stop"


def _without_end(text: str, end_texts: list[str]) -> str:
    for end in end_texts:
        if text.endswith(end):
            return text[: -len(end)]
    return text
