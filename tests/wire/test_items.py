# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Items validated by their type give what NeMo Gym's union gives: the same model, the same fields,
the same verdict on what it refuses (prorl_gym/wire/items.py)."""

import json

import pytest
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from pydantic import ValidationError

from prorl_gym.wire.items import INPUT_ITEM_UNION, ITEM_UNION, parse_create_params, parse_response, validate_item

IDS = {"prompt_token_ids": [1, 2, 3], "generation_token_ids": [4, 5], "generation_log_probs": [-0.5, -0.25]}
TEXT = {"type": "output_text", "text": "\\boxed{4}", "annotations": []}
ITEMS = [
    {"type": "function_call", "name": "python", "arguments": '{"code": "1"}', "call_id": "c1"},
    {"type": "function_call", "name": "python", "arguments": "{}", "call_id": "c1", "id": "fc", "status": "completed"},
    {"type": "function_call", "name": "python", "arguments": "{}", "call_id": "c1"} | IDS,
    {"type": "function_call", "name": "python", "arguments": "{}", "call_id": "c1", "routed_experts": [[[1]]]} | IDS,
    {
        "type": "function_call",
        "name": "python",
        "arguments": "{}",
        "call_id": "c1",
        "prompt_token_ids": [1],
    },  # not all
    {"type": "function_call", "name": "python", "arguments": "{}", "call_id": "c1"} | IDS | {"prompt_token_ids": "x"},
    {"type": "function_call", "name": "python", "call_id": "c1"},  # no arguments
    {"type": "function_call_output", "call_id": "c1", "output": "2"},
    {"type": "function_call_output", "call_id": "c1", "output": "2", "status": "completed", "id": "o"},
    {"type": "function_call_output", "call_id": "c1"},
    {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "hmm"}]},
    {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "hmm"}]} | IDS,
    {"type": "reasoning", "summary": []},  # no id
    {"type": "message", "role": "assistant", "id": "m", "content": [TEXT], "status": "completed"},
    {"type": "message", "role": "assistant", "id": "m", "content": [TEXT], "status": "completed"} | IDS,
    {"type": "message", "role": "assistant", "id": "m", "content": [{"type": "refusal", "refusal": "no"}]},
    {"type": "message", "role": "assistant", "id": "m", "content": [{"type": "input_text", "text": "hi"}]},
    {"type": "message", "role": "assistant", "id": "m", "content": "plain"},
    {"type": "message", "role": "assistant", "content": "plain"},
    {"role": "assistant", "content": "no type"} | IDS,
    {"role": "user", "content": "What is 2+2?"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    {"type": "message", "role": "system", "content": "be brief"} | IDS,
    {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}], "status": "completed"},
    {"role": "tool", "content": "?"},
    {"type": "web_search_call", "id": "w"},
    {"type": 3},
    {},
    "not an item",
]


def _verdict(validate, item):
    try:
        result = validate(item)
    except ValidationError as e:
        return "refused", sorted((error["type"], error["loc"]) for error in e.errors())
    return type(result).__name__, result.model_dump()


@pytest.mark.parametrize("union", [ITEM_UNION, INPUT_ITEM_UNION], ids=["output", "input"])
@pytest.mark.parametrize("item", ITEMS, ids=lambda item: json.dumps(item)[:60])
def test_an_item_is_what_the_union_makes_of_it(item, union):
    ours, theirs = _verdict(lambda i: validate_item(i, union), item), _verdict(union.validate_python, item)
    assert ours[0] == theirs[0]
    if ours[0] != "refused":  # a refusal is shown as the union's own (parse_*: the whole model's error)
        assert ours == theirs


def test_strict_items_of_nemo_gym_0_7_are_refused_as_it_refuses_them():
    """0.7: an output item must say its type (a request's input items may leave it out), and an item's token
    fields come all together or not at all (a partial set is refused, not silently dropped)."""
    untyped = {"role": "assistant", "content": "no type"}
    assert _verdict(validate_item, untyped)[0] == "refused"
    assert type(validate_item(untyped, INPUT_ITEM_UNION)).__name__ == "NeMoGymEasyInputMessage"
    partial = {"type": "function_call", "name": "python", "arguments": "{}", "call_id": "c1", "prompt_token_ids": [1]}
    for union in (ITEM_UNION, INPUT_ITEM_UNION):
        with pytest.raises(ValidationError, match="missing: generation_log_probs, generation_token_ids"):
            validate_item(partial, union)
    with pytest.raises(ValidationError, match="must include a type discriminator"):
        parse_response(json.dumps(_response([untyped])))
    params = parse_create_params({"input": [{"role": "user", "content": "hi"}, untyped]})  # input: accepted
    assert [item.role for item in params.input] == ["user", "assistant"]


def _response(output: list) -> dict:
    return {
        "id": "resp_1",
        "created_at": 1,
        "model": "m",
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "python", "parameters": {"type": "object"}, "strict": True}],
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "total_tokens": 5,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


GOOD = [ITEMS[i] for i in (0, 2, 7, 11, 14)]
BAD = [ITEMS[6]]


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps(_response(GOOD)),
        json.dumps(_response([])),
        json.dumps(_response(GOOD + BAD)),  # one bad item: the whole response's error, where it is
        json.dumps(_response(GOOD) | {"output": "no list"}),
        json.dumps(_response(GOOD) | {"usage": {"input_tokens": "many"}}),
        '{"truncated": ',
        "[1, 2]",
    ],
)
def test_a_response_parses_as_nemo_gym_parses_it(payload):
    def verdict(parse):
        try:
            response = parse(payload)
        except ValidationError as e:
            return "refused", [(error["type"], error["loc"]) for error in e.errors()]
        return [type(o).__name__ for o in response.output], response.model_dump_json()

    assert verdict(parse_response) == verdict(NeMoGymResponse.model_validate_json)


def test_the_items_validated_are_the_ones_the_response_keeps():
    response = parse_response(json.dumps(_response(GOOD)))
    assert [type(o).__name__ for o in response.output] == [
        "NeMoGymResponseFunctionToolCall",
        "NeMoGymResponseFunctionToolCallForTraining",
        "NeMoGymFunctionCallOutput",
        "NeMoGymResponseReasoningItemForTraining",
        "NeMoGymResponseOutputMessageForTraining",
    ]
    assert response.output[1].generation_token_ids == [4, 5]


@pytest.mark.parametrize(
    "body",
    [
        {"input": GOOD + [{"role": "user", "content": "next"}], "tools": _response([])["tools"]},
        {"input": "just text"},
        {"input": GOOD + BAD},
        {"input": GOOD, "unknown_field": 1},  # extra="forbid"
        {"tools": []},
        [],
    ],
)
def test_a_request_parses_as_nemo_gym_parses_it(body):
    def verdict(parse):
        try:
            params = parse(body)
        except ValidationError as e:
            return "refused", [(error["type"], error["loc"]) for error in e.errors()]
        return params.model_dump_json()

    assert verdict(parse_create_params) == verdict(NeMoGymResponseCreateParamsNonStreaming.model_validate)
