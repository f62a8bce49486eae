# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Responses API items validated by their own `type`, as NeMo Gym's models would validate them.

NeMo Gym's item type is a union of eleven models, which pydantic's smart union tries one after
another on every item: an item's token ids (thousands of them in a late turn) are validated once
per candidate that has them (five), ~0.3-0.7 ms per policy answer in the agent and as much again in
the model server. An item's `type` names its model: for every type but `message` only one model
(and its `...ForTraining` twin, which the union picks whenever the token ids are there) accepts
it; a message from the assistant with an `id` is an output message, any other message goes
through the union. Anything the pick does not accept goes through the union too, so the result
(and the error) is the union's own (the differential test: tests/wire/test_items.py): an item with some
of its token fields but not all (NeMo Gym 0.7 refuses it), an output item without a `type` (0.7 refuses
it too; a request's input items may still leave it out, as its input union allows).
"""

from __future__ import annotations

from typing import Any

from nemo_gym.openai_utils import (
    RESPONSES_TO_TRAIN,
    NeMoGymChatCompletionAssistantMessageForTrainingParam,
    NeMoGymChatCompletionDeveloperMessageParam,
    NeMoGymChatCompletionSystemMessageParam,
    NeMoGymChatCompletionToolMessageParam,
    NeMoGymChatCompletionUserMessageParam,
    NeMoGymFunctionCallOutput,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseInputItem,
    NeMoGymResponseOutputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseReasoningItem,
)
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

ITEM_UNION = TypeAdapter(NeMoGymResponseOutputItem)
INPUT_ITEM_UNION = TypeAdapter(NeMoGymResponseInputItem)  # a request's items: `type` may be left out
TRAINING_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")  # all three: ...ForTraining
# An item's token ids (and MoE routing): what a reader of its text (a verifier, the dashboard) leaves out.
TOKEN_FIELDS = frozenset({*TRAINING_FIELDS, "routed_experts"})
_BY_TYPE: dict[str, type[BaseModel]] = {
    "function_call": NeMoGymResponseFunctionToolCall,
    "function_call_output": NeMoGymFunctionCallOutput,
    "reasoning": NeMoGymResponseReasoningItem,
}


def _model_of(item: dict) -> type[BaseModel] | None:
    kind = item.get("type")
    model = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if kind == "function_call_output" and "id" in item:
        return None  # with an id (and a status) the output union makes it the SDK's output item: its pick
    if (
        kind == "message"
        and item.get("role") == "assistant"
        and "id" in item
        and isinstance(item.get("content"), list)
    ):
        model = NeMoGymResponseOutputMessage
    if model is not None and TOKEN_FIELDS & item.keys():
        if not all(field in item for field in TRAINING_FIELDS):
            return None  # some token fields, not all: the union's refusal
        model = RESPONSES_TO_TRAIN.get(model, model)
    return model


def validate_item(item: Any, union: TypeAdapter = ITEM_UNION) -> BaseModel | Any:
    """One output item (or, with INPUT_ITEM_UNION, input item), as the union validates it (instances pass
    as they are)."""
    if isinstance(item, dict) and (model := _model_of(item)) is not None:
        try:
            return model.model_validate(item)
        except ValidationError:
            pass  # the union's own verdict (another member may take it, or its error is the one to show)
    return union.validate_python(item)


def without_token_ids(item: BaseModel | dict) -> dict:
    """An item as a dict without its token ids (a dict that has none is returned as it is)."""
    if isinstance(item, BaseModel):
        return item.model_dump(exclude=TOKEN_FIELDS)
    return {k: v for k, v in item.items() if k not in TOKEN_FIELDS} if TOKEN_FIELDS & item.keys() else item


def parse_response(payload: bytes | str) -> NeMoGymResponse:
    """A Responses API answer (JSON), as NeMoGymResponse.model_validate_json gives it."""
    try:
        data = from_json(payload)  # ~3x json.loads on long lists of ids
    except ValueError:
        return NeMoGymResponse.model_validate_json(payload)  # its own error
    return NeMoGymResponse.model_validate(_with_items(data, "output", ITEM_UNION))


def parse_create_params(data: Any) -> NeMoGymResponseCreateParamsNonStreaming:
    """A Responses API request (decoded JSON), as NeMoGymResponseCreateParamsNonStreaming validates it."""
    return NeMoGymResponseCreateParamsNonStreaming.model_validate(_with_items(data, "input", INPUT_ITEM_UNION))


def _with_items(data: Any, key: str, union: TypeAdapter) -> Any:
    """`data` with its items under `key` validated one by one; as it is where that fails (the whole
    model's validation then reports the error where it is)."""
    if not isinstance(data, dict) or not isinstance(items := data.get(key), list):
        return data
    try:
        return data | {key: [validate_item(item, union) for item in items]}
    except ValidationError:
        return data


# The fields NeMo Gym 0.7's chat completion messages have, per role (its model servers refuse any other field,
# 422). A client library adds its own to the history it sends back (litellm: provider_specific_fields; a reply's
# annotations): fields no chat template renders, so the model's prompt is the same without them.
CHAT_MESSAGE_FIELDS: dict[str, frozenset[str]] = {
    role: frozenset(param.__required_keys__ | param.__optional_keys__) - TOKEN_FIELDS
    for role, param in {
        "developer": NeMoGymChatCompletionDeveloperMessageParam,
        "system": NeMoGymChatCompletionSystemMessageParam,
        "user": NeMoGymChatCompletionUserMessageParam,
        "assistant": NeMoGymChatCompletionAssistantMessageForTrainingParam,
        "tool": NeMoGymChatCompletionToolMessageParam,
    }.items()
}


def chat_message_fields(message: dict) -> dict:
    """A chat message with the fields its role has in NeMo Gym, no token ids among them (a message of
    another role as it is: the model server says what is wrong with it)."""
    fields = CHAT_MESSAGE_FIELDS.get(message.get("role"))  # type: ignore[arg-type]
    return message if fields is None else {k: v for k, v in message.items() if k in fields}
