# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A raw generation read back into reasoning, content and tool calls, per model family.

A completion route (token ids in, token ids out) runs no tool-call or reasoning parser: this does what
vLLM's parser of the same name does on its chat route (`--tool-call-parser`, `--reasoning-parser`), so
the agent gets the same calls either way. The ids are never derived from what is parsed here.

    parse(text, tools="hermes", reasoning="think", malformed="call", *, tool_schemas=None, token_ids=None)

Tool parsers (TOOL_PARSERS; the template's own call syntax must match: `check_template`):
  hermes        Qwen2.5, Qwen3, Hermes: `<tool_call>{"name", "arguments"}</tool_call>` blocks
  qwen3_coder   Qwen3-Coder, Qwen3.5: `<tool_call><function=NAME><parameter=P>VALUE</parameter>...`, values
                typed by the tool's JSON schema (`tool_schemas`), one newline stripped each side
  llama3_json   Llama 3.x: `{"name", "parameters"|"arguments"}` objects, optionally after `<|python_tag|>`,
                several separated by `;`
  deepseek_v3   DeepSeek V3/R1: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>`
  deepseek_v31  DeepSeek V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`
  mistral       Mistral (Hugging Face tokenizer, as vLLM with a chat template): `[TOOL_CALLS][{...}, ...]`
  openai        gpt-oss (harmony): `commentary to=functions.NAME` messages, read from the token ids
Reasoning parsers (REASONING_PARSERS): think (before `</think>`, an opening `<think>` dropped, edge newlines
stripped), qwen3 and deepseek_r1 (vLLM's: qwen3 needs both tags; deepseek_r1 reads an unclosed block as
reasoning), openai (harmony's analysis channel).

`malformed`: what a call that does not parse becomes. "content" is what vLLM does (the whole text is the
answer); "call" (token-in/token-out) gives the policy a call with the name it wrote (if any) and its
arguments as written, so it is told its call did not parse, as for any malformed call.
"""

from __future__ import annotations

from typing import Literal

from prorl_gym.errors import ProrlError
from prorl_gym.tokens.parsers import harmony, reasoning_tags, tools_json, tools_tagged
from prorl_gym.tokens.parsers.base import ParsedTurn

ToolParser = Literal[
    "hermes", "qwen3_coder", "llama3_json", "deepseek_v3", "deepseek_v31", "mistral", "openai", "none"
]
ReasoningParser = Literal["think", "qwen3", "deepseek_r1", "openai", "none"]
TOOL_PARSERS = {
    "hermes": tools_json.hermes,
    "llama3_json": tools_json.llama3_json,
    "mistral": tools_json.mistral,
    "qwen3_coder": tools_tagged.qwen3_coder,
    "deepseek_v3": tools_tagged.deepseek_v3,
    "deepseek_v31": tools_tagged.deepseek_v31,
}
# What a template writes for an assistant's tool call, per parser: its call syntax (check_template).
CALL_SYNTAX = {
    "hermes": ("<tool_call>", '"arguments"'),
    "qwen3_coder": ("<function=", "<parameter="),
    "llama3_json": ('"parameters"', "<|python_tag|>"),
    "deepseek_v3": ("<｜tool▁sep｜>", "```json"),
    "deepseek_v31": ("<｜tool▁sep｜>",),
    "mistral": ("[TOOL_CALLS]",),
    "openai": ("functions.", "<|call|>"),
}
REASONING_PARSERS = ("think", "qwen3", "deepseek_r1", "openai", "none")


class ParserMismatch(ProrlError, ValueError):
    """The configured tool parser does not read the call syntax the model's template writes."""


def parse(
    text: str,
    tools: ToolParser = "hermes",
    reasoning: ReasoningParser = "think",
    malformed: Literal["call", "content"] = "call",
    *,
    tool_schemas: dict[str, dict] | None = None,
    token_ids: list[int] | None = None,
) -> ParsedTurn:
    """`text`: the generation without its end-of-turn token; `tool_schemas`: each offered tool's JSON schema
    by name (qwen3_coder types values by it); `token_ids`: the generated ids (openai reads the ids)."""
    if "openai" in (tools, reasoning):
        return harmony.parse(text, token_ids, tools == "openai", reasoning == "openai", malformed == "call")
    thought, text = reasoning_tags.split(text, reasoning)
    if tools == "none":
        return ParsedTurn(text, thought)
    extracted = TOOL_PARSERS[tools](text, tool_schemas or {})
    if extracted.written is not None and malformed == "call":
        return ParsedTurn(extracted.before, thought, extracted.written)
    return ParsedTurn(extracted.content, thought, extracted.calls)


def check_template(tools: ToolParser, template: str, template_name: str = "the chat template") -> None:
    """Raise ParserMismatch (naming the parsers that would fit) when the template's tool-call syntax is
    not the parser's: every call would otherwise come back to the agent as a plain answer."""
    if tools == "none" or "tool_calls" not in template:
        return
    if all(marker in template for marker in CALL_SYNTAX[tools]):
        return
    fits = [name for name, markers in CALL_SYNTAX.items() if all(m in template for m in markers)]
    known = ", ".join(sorted(CALL_SYNTAX))
    raise ParserMismatch(
        f"tool_parser {tools!r} does not read the tool calls {template_name} writes "
        f"(it lacks {' and '.join(repr(m) for m in CALL_SYNTAX[tools])}); "
        + (f"it fits tool_parser {' or '.join(repr(f) for f in fits)}. " if fits else "no supported parser fits it. ")
        + f"Supported: {known} (docs/tokens.md: model families)"
    )
