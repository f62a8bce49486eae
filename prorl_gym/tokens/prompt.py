# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The prompt of a turn as token ids: token-in/token-out.

The first turn is the conversation rendered by the chat template and tokenized. Every later turn is
the previous turn's prompt ids + the ids the model generated (exactly; when it stopped without
emitting an end-of-turn token, on a stop string or a length limit, the end token the template closes
such a turn with) + the ids of the messages that came since (tool results, user turns) rendered by the
template as they follow an ended assistant turn, generation prompt included (the bridge: bridge.py,
proven against whole renders when the model server starts). The previous ids travel with the
conversation: NeMo Gym puts them on the assistant message of that turn (prompt_token_ids,
generation_token_ids), so no state is kept between calls and branches work.

End tokens come from the model's files: every eos id of generation_config.json (Llama: <|eot_id|>,
<|eom_id|>, <|end_of_text|>; gpt-oss: <|return|>, <|call|>), the tokenizer's eos, and the token the
template closes assistant turns with. A generation that ends on any of them is kept as it is.

A conversation whose last assistant turn carries no ids (it was written by hand, edited, or came
from another server) cannot be extended: it is rendered whole, and the prompt says so (`kind`
"rerendered", with the reason): never silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from prorl_gym.tokens import bridge
from prorl_gym.tokens.bridge import MARK, MARK_USER, stand_in
from prorl_gym.tokens.tokenizer import LocalTokenizer

PromptKind = Literal["rendered", "extended", "rerendered"]
PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Run {key}.",
            "parameters": {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]},
        },
    }
    for name, key in (("python", "code"), ("bash", "cmd"))
]


class TokenSource(Protocol):
    """Where templates are rendered and text tokenized: a local tokenizer, or the policy server itself."""

    async def end_ids(self) -> frozenset[int]:
        """Every id that ends a turn."""
        ...

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        """The whole conversation with the generation prompt."""
        ...

    async def after_turn(
        self, turn: dict, messages: list[dict], tools: list[dict] | None, kwargs: dict
    ) -> tuple[int, list[int]]:
        """(the end id the template closes `turn` with, `messages` as they follow it with the generation prompt)."""
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
    end, after = await source.after_turn(turn, messages[last + 1 :], tools, kwargs)
    if not generated or ids[-1] not in await source.end_ids():  # stopped on a stop string or a length limit
        ids.append(end)
    return Prompt(ids + after, "extended")


class LocalTokens:
    """A TokenSource on a local tokenizer and its chat template. Rendering and tokenizing a turn's new
    messages take about a millisecond: done inline. `check()` proves the bridge (at start-up)."""

    def __init__(self, tokenizer: LocalTokenizer):
        self.tokenizer = tokenizer
        self.ends = tokenizer.end_ids | self._template_ends()
        self._end_texts = [tokenizer.token(i) for i in sorted(self.ends)]
        self.checked: bridge.Checked | None = None

    def check(self) -> bridge.Checked:
        """The bridge proven on the probe conversation (bridge.BridgeMismatch, with the reason, otherwise)."""
        self.checked = bridge.check(lambda m, g: self.tokenizer.render(m, PROBE_TOOLS, g), self._end_texts)
        return self.checked

    def _template_ends(self) -> frozenset[int]:
        """The special token the template closes an assistant turn with: an answer that ends the conversation
        (gpt-oss: <|return|>), one a user turn follows (<|end|>), a tool call (<|call|>)."""
        user = {"role": "user", "content": MARK_USER}
        calls = stand_in({"tool_calls": [{"id": bridge.call_id("alnum9"), "function": {"name": "python"}}]})
        ends = set()
        for shape, last in (
            ([user, stand_in(None)], True),
            ([user, stand_in(None), user], False),
            ([user, calls], True),
        ):
            try:
                text = self.tokenizer.render(shape, PROBE_TOOLS, False)
            except Exception:  # noqa: BLE001 - a template that refuses a shape has no end to offer for it
                continue
            start = text.find(MARK_USER) + len(MARK_USER)
            ids = [i for i in self.tokenizer.encode(text[start:]) if self.tokenizer.is_special(i)]
            if last and ids:
                ends.add(ids[-1])
            elif not last and MARK in text:
                after = [i for i in self.tokenizer.encode(text[text.index(MARK) + len(MARK) :])[:1]]
                ends.update(i for i in after if self.tokenizer.is_special(i))
        return frozenset(ends)

    async def end_ids(self) -> frozenset[int]:
        return self.ends

    async def conversation(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        return self.tokenizer.encode(self.tokenizer.render(messages, tools, True, **kwargs))

    async def after_turn(
        self, turn: dict, messages: list[dict], tools: list[dict] | None, kwargs: dict
    ) -> tuple[int, list[int]]:
        one_call = bool(self.checked and self.checked.one_call)
        rendered = bridge.bridge(
            lambda m, g: self.tokenizer.render(m, tools, g, **kwargs), self._end_texts, turn, messages, one_call
        )
        return self.tokenizer.token_id(rendered.end), self.tokenizer.encode(rendered.text)


def bridge_messages(turn: dict, messages: list[dict]) -> list[dict]:
    """The new messages after a stand-in ended assistant turn whose content is the marker (for a server's
    /tokenize: its token strings find the marker)."""
    return [{"role": "user", "content": MARK_USER}, stand_in(turn) | {"content": MARK}, *messages]


def bridge_from_tokens(tokens: list[int], token_strs: list[str], ends: frozenset[int]) -> tuple[int, list[int]]:
    """(the end id, the bridge) out of the stand-in conversation's tokens: those after the end-of-turn token
    that follows the marker (found in the tokens' own strings, which spell a run of plain letters as is).
    The marker comes before the new messages, so the search stops early whatever they hold."""
    text, marker = "", None
    for index, piece in enumerate(token_strs):
        text += piece
        if MARK in text:
            marker = index
            break
    if marker is None:  # e.g. Llama's template writes no content beside an assistant's tool calls
        raise ValueError(
            "the marker of the bridge was not found in the tokens (the template does not write an assistant's "
            "content beside its tool calls): use a local tokenizer (tokenizer: a family or a directory)"
        )
    for after in range(marker + 1, len(tokens)):
        if tokens[after] in ends:
            return tokens[after], tokens[after + 1 :]
    raise ValueError("no end-of-turn token after the bridge's marker")
