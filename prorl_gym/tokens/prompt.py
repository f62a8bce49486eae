# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The prompt of a turn as token ids: token-in/token-out.

The first turn is the conversation rendered by the chat template and tokenized. Every later turn is
the previous turn's prompt ids + the ids the model generated (exactly; when it stopped without
emitting an end-of-turn token, on a stop string or a length limit, the template's end-of-turn) +
the ids of the messages that came since (tool results, user turns) rendered by the template as they
follow an ended assistant turn, generation prompt included (the "bridge"). The previous ids travel
with the conversation: NeMo Gym puts them on the assistant message of that turn
(prompt_token_ids, generation_token_ids), so no state is kept between calls and branches work.

The bridge is rendered after a stand-in assistant turn whose content is a marker: what follows the
end-of-turn token closing that turn is what the template writes for the new messages. It starts
right after a special token, so tokenizing it alone merges nothing across the boundary.

A conversation whose last assistant turn carries no ids (it was written by hand, edited, or came
from another server) cannot be extended: it is rendered whole, and the prompt says so (`kind`
"rerendered", with the reason): never silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from prorl_gym.tokens.tokenizer import LocalTokenizer

MARK = "PRORLBRIDGEMARK"  # letters only: one run of plain characters in any vocabulary
MARK_USER = "PRORLBRIDGEUSER"
PromptKind = Literal["rendered", "extended", "rerendered"]


class TokenSource(Protocol):
    """Where templates are rendered and text tokenized: a local tokenizer, or the policy server itself."""

    async def end_ids(self) -> tuple[int, frozenset[int]]:
        """(the template's end-of-turn id, every id that ends a turn)."""
        ...

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        """The whole conversation with the generation prompt."""
        ...

    async def after_turn(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        """`messages` as they follow an ended assistant turn, with the generation prompt."""
        ...


@dataclass
class Prompt:
    ids: list[int]
    kind: PromptKind
    reason: str | None = None  # why a conversation was rendered whole instead of extended


async def turn_prompt(
    source: TokenSource, messages: list[dict], tools: list[dict] | None = None, kwargs: dict | None = None
) -> Prompt:
    kwargs = kwargs or {}
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
    if last is None:
        return Prompt(await source.conversation(messages, tools, kwargs), "rendered")
    turn = messages[last]
    prompt, generated = turn.get("prompt_token_ids"), turn.get("generation_token_ids")
    if not prompt or generated is None:
        reason = "the last assistant turn carries no token ids"
        return Prompt(await source.conversation(messages, tools, kwargs), "rerendered", reason)
    ids = [int(i) for i in prompt] + [int(i) for i in generated]
    end, ends = await source.end_ids()
    if not generated or ids[-1] not in ends:  # stopped on a stop string or a length limit
        ids.append(end)
    return Prompt(ids + await source.after_turn(messages[last + 1 :], tools, kwargs), "extended")


def bridge_messages(messages: list[dict]) -> list[dict]:
    """The new messages after a stand-in ended assistant turn (see the module docstring)."""
    return [{"role": "user", "content": MARK_USER}, {"role": "assistant", "content": MARK}, *messages]


class LocalTokens:
    """A TokenSource on a local tokenizer and its chat template. Rendering and tokenizing a turn's new
    messages take well under a millisecond: done inline."""

    def __init__(self, tokenizer: LocalTokenizer):
        self.tokenizer = tokenizer

    async def end_ids(self) -> tuple[int, frozenset[int]]:
        return self.tokenizer.eos_id, self.tokenizer.end_ids

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        return self.tokenizer.encode(self.tokenizer.render(messages, tools, True, **kwargs))

    async def after_turn(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        text = self.tokenizer.render(bridge_messages(messages), tools, True, **kwargs)
        start = text.index(MARK) + len(MARK)
        start = text.index(self.tokenizer.eos_token, start) + len(self.tokenizer.eos_token)
        return self.tokenizer.encode(text[start:])


def bridge_from_tokens(tokens: list[int], token_strs: list[str], ends: frozenset[int]) -> list[int]:
    """The bridge out of the stand-in conversation's tokens: those after the end-of-turn token that
    follows the marker (found in the tokens' own strings, which spell a run of plain letters as is).
    The marker comes before the new messages, so the search stops early whatever they hold."""
    text, marker = "", None
    for index, piece in enumerate(token_strs):
        text += piece
        if MARK in text:
            marker = index
            break
    if marker is None:
        raise ValueError("the marker of the bridge was not found in the tokens")
    for after in range(marker + 1, len(tokens)):
        if tokens[after] in ends:
            return tokens[after + 1 :]
    raise ValueError("no end-of-turn token after the bridge's marker")
