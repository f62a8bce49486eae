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
(and the error) is the union's own (the differential test: tests/wire/test_items.py).
"""

from __future__ import annotations

from typing import Any

from nemo_gym.openai_utils import (
    RESPONSES_TO_TRAIN,
    NeMoGymFunctionCallOutput,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseOutputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseReasoningItem,
)
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

ITEM_UNION = TypeAdapter(NeMoGymResponseOutputItem)
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
    if (
        kind == "message"
        and item.get("role") == "assistant"
        and "id" in item
        and isinstance(item.get("content"), list)
    ):
        model = NeMoGymResponseOutputMessage
    if model is not None and all(field in item for field in TRAINING_FIELDS):
        model = RESPONSES_TO_TRAIN.get(model, model)
    return model


def validate_item(item: Any) -> BaseModel | Any:
    """One input or output item, as the union validates it (instances pass as they are)."""
    if isinstance(item, dict) and (model := _model_of(item)) is not None:
        try:
            return model.model_validate(item)
        except ValidationError:
            pass  # the union's own verdict (another member may take it, or its error is the one to show)
    return ITEM_UNION.validate_python(item)


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
    return NeMoGymResponse.model_validate(_with_items(data, "output"))


def parse_create_params(data: Any) -> NeMoGymResponseCreateParamsNonStreaming:
    """A Responses API request (decoded JSON), as NeMoGymResponseCreateParamsNonStreaming validates it."""
    return NeMoGymResponseCreateParamsNonStreaming.model_validate(_with_items(data, "input"))


def _with_items(data: Any, key: str) -> Any:
    """`data` with its items under `key` validated one by one; as it is where that fails (the whole
    model's validation then reports the error where it is)."""
    if not isinstance(data, dict) or not isinstance(items := data.get(key), list):
        return data
    try:
        return data | {key: [validate_item(item) for item in items]}
    except ValidationError:
        return data
