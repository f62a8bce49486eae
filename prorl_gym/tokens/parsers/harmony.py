# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""gpt-oss's harmony format, read with the openai-harmony package as vLLM's `openai` tool parser and
`openai_gptoss` reasoning parser do: messages to `functions.NAME` are calls (JSON arguments re-serialised),
the analysis channel is reasoning, the final channel (else a commentary without recipient) the content.

openai-harmony reads its vocabulary (o200k_base.tiktoken) from TIKTOKEN_ENCODINGS_BASE or downloads it;
`make setup` puts the file in the token cache (prorl_gym/tokens/families.py) and this points there.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from prorl_gym.paths import TOKEN_CACHE
from prorl_gym.tokens.parsers.base import ParsedTurn


@cache
def encoding():
    base = Path(os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(TOKEN_CACHE / "tiktoken")))  # never download
    if not (base / "o200k_base.tiktoken").is_file():
        raise FileNotFoundError(f"gpt-oss's vocabulary is not at {base}/o200k_base.tiktoken: make setup puts it there")
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def parse(text: str, token_ids: list[int] | None, tools: bool, reasoning: bool, written: bool = False):
    """`written`: a call still open where the ids end (a cut generation) is given as written, not dropped."""
    from openai_harmony import HarmonyError, Role, StreamableParser

    ids = list(token_ids) if token_ids is not None else encoding().encode(text, allowed_special="all")
    parser = StreamableParser(encoding(), role=Role.ASSISTANT)
    try:
        for token in ids:
            parser.process(token)
    except HarmonyError:
        return ParsedTurn(text)  # not harmony: the text as it is
    calls, final, commentary, thoughts = [], None, None, []
    for message in parser.messages:
        if not message.content:
            continue
        body = message.content[0].text
        if message.channel == "analysis":
            thoughts.append(body)
        elif tools and message.recipient and message.recipient.startswith("functions."):
            arguments = _arguments(message.content_type, body)
            calls.append({"name": message.recipient.split("functions.")[1], "arguments": arguments})
        elif message.channel == "final":
            final = body
        elif message.channel == "commentary" and not message.recipient:
            commentary = body
    recipient = parser.current_recipient or ""
    if tools and written and recipient.startswith("functions.") and parser.current_content:
        arguments = _arguments(parser.current_content_type, parser.current_content)
        calls.append({"name": recipient.split("functions.")[1], "arguments": arguments})
    if parser.current_content:  # a cut generation: its last message so far
        if parser.current_channel == "final":
            final = parser.current_content
        elif parser.current_channel == "commentary" and not parser.current_recipient:
            commentary = parser.current_content
        elif parser.current_channel == "analysis":
            thoughts.append(parser.current_content)
    thought = "\n".join(thoughts) or None if reasoning else None
    return ParsedTurn(final or commentary or "", thought, calls)


def _arguments(content_type: str | None, body: str) -> str:
    if content_type and "json" not in content_type:
        return body
    try:
        return json.dumps(json.loads(body))  # vLLM's: ASCII-escaped, one line
    except ValueError:
        return body
