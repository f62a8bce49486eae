# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The wire protocols a harness may speak to its capture endpoint: OpenAI chat completions, the
OpenAI Responses API and Anthropic Messages. Each call is mapped onto a chat completion request,
which the capture forwards and records (trajectory.py: the ids, what a call extends), and the answer
mapped back, with NeMo Gym's own converters (the ones its model servers use), so a call recorded
from any of them reads the same. Ids a harness sends never reach the model server: the capture puts
back the ones the model produced.

Streaming: a client's `stream: true` is answered with the event stream of the complete answer (the
capture needs the whole reply first), in each protocol's own events, as NeMo Gym's model servers
answer it (0.7: nemo_gym.responses_streaming, nemo_gym.chat_streaming). Their streaming dialects
carry fields a non-streaming request has no place for (Codex CLI: `client_metadata`,
`prompt_cache_key`, namespaced tools, `reasoning.summary`): NeMo Gym's sanitizers map them onto the
plain request, and namespaced tool calls go back under their namespace.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming, NeMoGymResponseUsage
from pydantic import ValidationError

from prorl_gym.errors import ProrlError
from prorl_gym.wire.resources import CHAT_COMPLETIONS_PATH, MESSAGES_PATH, MODEL_PATHS, RESPONSES_PATH

# No ids in or out: the harness's are dropped (trajectory.py attaches the model's); the answer has none.


# NeMo Gym's converters, built on first use: the Anthropic one imports the anthropic SDK (~0.5 CPU-s
# per agent process), which an agent whose harnesses speak chat completions never needs.
@cache
def _responses_converter():
    from nemo_gym.responses_converter import ResponsesConverter

    return ResponsesConverter(return_token_id_information=False)


@cache
def _anthropic_converter():
    from nemo_gym.anthropic_converter import AnthropicConverter

    return AnthropicConverter()


def _anthropic_sse(message: dict, request: dict) -> Iterator[str]:
    return _anthropic_converter().anthropic_response_to_sse(message)


@cache
def _responses_streaming():
    import nemo_gym.responses_streaming

    return nemo_gym.responses_streaming


@cache
def _chat_streaming():
    import nemo_gym.chat_streaming

    return nemo_gym.chat_streaming


class InvalidCall(ProrlError):
    """A request the protocol cannot take (a 4xx with the reason)."""

    def __init__(self, reason: str, status: int = 422):
        super().__init__(reason)
        self.reason, self.status = reason, status


@dataclass(frozen=True)
class WireProtocol:
    name: str  # as the record names it
    path: str  # under the capture's base URL (…/capture/{key}/v1)
    to_chat: Callable[[dict], dict]  # its request as a chat completion request; InvalidCall if it is not one
    from_chat: Callable[[dict, dict], dict]  # (chat completion, its request) -> its answer
    error: Callable[[int, str, str], dict]  # (status, type, message) -> its error body
    sse: Callable[[dict, dict], Iterator[str]]  # (its answer, its request) -> the answer's event stream


def _openai_error(status: int, type_: str, message: str) -> dict:
    return {"error": {"message": message, "type": type_, "code": status}}


# ---------------------------------------------------------------- chat completions


def _chat_to_chat(body: dict) -> dict:
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise InvalidCall("a chat completion request needs a non-empty `messages` list")
    if body.get("stream") is True:  # its streaming dialect (OpenCode): stream options and bookkeeping dropped
        return _chat_streaming().sanitize_streaming_chat_body(body)[0]
    return body


def _chat_sse(completion: dict, request: dict) -> Iterator[str]:
    include_usage = _chat_streaming().sanitize_streaming_chat_body({"stream_options": request.get("stream_options")})
    return _chat_streaming().synthesize_chat_completion_sse(completion, include_usage=include_usage[1])


# ---------------------------------------------------------------- Responses API


def _responses_to_chat(body: dict) -> dict:
    if body.get("previous_response_id"):
        raise InvalidCall("previous_response_id is not supported: send the whole input (store=false)", 400)
    streaming = _responses_streaming()
    if isinstance(body.get("tools"), list):  # `strict` may be left out (OpenAI's API takes that); the model wants it
        body = body | {"tools": [t | {"strict": t.get("strict")} if _is_function(t) else t for t in body["tools"]]}
    if body.get("stream"):  # its streaming dialect (Codex CLI): mapped onto the plain request, as NeMo Gym does
        body = streaming.sanitize_streaming_responses_body(body)[0]
    else:
        body = {k: v for k, v in body.items() if k != "stream"}
    # What asks for more than a chat completion has (a reasoning summary, `include`: encrypted reasoning, ...): the
    # answer comes without it, as it would from a model that has none to give
    if isinstance(reasoning := body.get("reasoning"), dict):
        body["reasoning"] = {"effort": reasoning["effort"]} if reasoning.get("effort") else None
    body.pop("include", None)
    try:
        return _as_chat(streaming.validate_streaming_responses_params(body))
    except (ValidationError, NotImplementedError, KeyError, TypeError) as exc:
        raise InvalidCall(f"not a Responses API request this endpoint can take: {_reason(exc)}") from None


def _as_chat(params: NeMoGymResponseCreateParamsNonStreaming) -> dict:
    """Responses create params as a chat completion request (NeMo Gym's converter: since 0.7 `instructions`
    lead the conversation as its system message, with a leading system or developer message folded in)."""
    return _responses_converter().responses_to_chat_completion_create_params(params).model_dump(exclude_unset=True)


def _is_function(tool: object) -> bool:
    return isinstance(tool, dict) and tool.get("type") == "function"


def _reason(exc: Exception) -> str:
    """The first few of a validation's errors (a union's are many), else the exception."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return f"{type(exc).__name__}: {exc}"


def _chat_to_response(completion: dict, request: dict) -> dict:
    choice = (completion.get("choices") or [{}])[0]
    output = [
        item.model_dump()
        for item in _responses_converter().postprocess_assistant_message_dict(choice.get("message") or {})
    ]
    tools, namespaces = _responses_streaming().flatten_namespace_tools(request.get("tools"))
    output = _responses_streaming().restore_namespace_tool_calls(output, namespaces)  # called as it offered them
    usage = completion.get("usage") or {}
    prompt_tokens, completion_tokens = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(choice.get("finish_reason"))
    response = NeMoGymResponse(
        id=f"resp_{uuid.uuid4().hex}",
        created_at=int(time.time()),
        model=str(request.get("model") or completion.get("model") or ""),
        object="response",
        output=output,
        tool_choice=request.get("tool_choice") or "auto",
        parallel_tool_calls=request.get("parallel_tool_calls", True),
        tools=[t for t in tools if isinstance(t, dict) and t.get("type") in ("function", "custom")],
        instructions=request.get("instructions"),
        metadata=request.get("metadata"),
        incomplete_details={"reason": reason} if reason else None,
        usage=NeMoGymResponseUsage(
            input_tokens=prompt_tokens,
            input_tokens_details={"cached_tokens": 0},
            output_tokens=completion_tokens,
            output_tokens_details={"reasoning_tokens": 0},
            total_tokens=prompt_tokens + completion_tokens,
        ),
    )
    return response.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------- Anthropic Messages


def _messages_to_chat(body: dict) -> dict:
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise InvalidCall("a Messages request needs a non-empty `messages` list")
    try:
        return _as_chat(_anthropic_converter().anthropic_request_to_responses(body))
    except (ValidationError, NotImplementedError, KeyError, TypeError, ValueError) as exc:
        raise InvalidCall(f"not a Messages request this endpoint can take: {_reason(exc)}") from None


def _chat_to_message(completion: dict, request: dict) -> dict:
    response = NeMoGymResponse.model_validate(_chat_to_response(completion, {}))
    return _anthropic_converter().responses_to_anthropic_response(response, str(request.get("model") or ""))


def _anthropic_error(status: int, type_: str, message: str) -> dict:
    kinds = {400: "invalid_request_error", 403: "permission_error", 404: "not_found_error", 413: "request_too_large"}
    return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": f"{type_}: {message}"}}


CHAT = WireProtocol("chat_completions", CHAT_COMPLETIONS_PATH, _chat_to_chat, lambda c, _: c, _openai_error, _chat_sse)
RESPONSES = WireProtocol(
    "responses",
    RESPONSES_PATH,
    _responses_to_chat,
    _chat_to_response,
    _openai_error,
    lambda response, _: _responses_streaming().synthesize_responses_sse(response),
)
MESSAGES = WireProtocol(
    "anthropic_messages", MESSAGES_PATH, _messages_to_chat, _chat_to_message, _anthropic_error, _anthropic_sse
)
PROTOCOLS = {p.path: p for p in (CHAT, RESPONSES, MESSAGES)}
assert set(PROTOCOLS) == MODEL_PATHS  # an in-sandbox harness reaches each, and nothing else
