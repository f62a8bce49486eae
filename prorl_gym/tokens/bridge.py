# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge: what a chat template writes after an ended assistant turn for the messages that follow
it (tool results, a user turn) and the next generation prompt, as text, for one template.

It is rendered after a stand-in conversation: a user message, then an assistant turn shaped like the
real one (its tool calls, with their ids and names, arguments `{}`; otherwise a marker as content), then
the new messages. What follows the stand-in's end-of-turn token is the bridge; the token itself is the
one the template closes such a turn with (appended when a generation stopped without one).

`check(template)` proves it at start-up: a probe conversation (a system prompt, a tool call, its result,
an answer, a user turn, two parallel calls and their results) is rendered whole, and rebuilt the way
token-in/token-out builds prompts (the first prompt, then each assistant turn as the whole render writes
it, its end token, the bridge). Identical, or BridgeMismatch says where and why. It also picks the form of
tool-call ids the template accepts (Mistral's templates want 9 alphanumerics).
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from jinja2.exceptions import TemplateError

from prorl_gym.errors import ProrlError

MARK = "PRORLBRIDGEMARK"  # letters only: one run of plain characters in any vocabulary
MARK_USER = "PRORLBRIDGEUSER"
ID_FORMS = ("openai", "alnum9")


class BridgeMismatch(ProrlError, ValueError):
    """Prompts extended turn by turn would not be what the template renders: the model server refuses to start."""


def call_id(form: str) -> str:
    if form == "alnum9":  # Mistral: [a-zA-Z0-9]{9}
        return "".join(random.choices(string.ascii_letters + string.digits, k=9))
    return f"call_{uuid.uuid4().hex[:24]}"


def stand_in(turn: dict | None) -> dict:
    """An assistant turn the template renders like `turn`: its calls' ids and names, nothing it generated."""
    calls = [
        {"id": c.get("id"), "type": "function", "function": {"name": c["function"]["name"], "arguments": "{}"}}
        for c in (turn or {}).get("tool_calls") or []
    ]
    return (
        {"role": "assistant", "content": None, "tool_calls": calls}
        if calls
        else {"role": "assistant", "content": MARK}
    )


@dataclass
class Bridged:
    text: str  # after the stand-in's end token: the new messages and the generation prompt
    end: str  # the end token the template closes such a turn with


Render = Callable[[list[dict], bool], str]  # (messages, add_generation_prompt) -> text


def bridge(
    render: Render, ends: list[str], turn: dict | None, messages: list[dict], one_call: bool = False
) -> Bridged:
    """`one_call`: the stand-in carries the turn's first call only (templates that take one call a turn)."""
    standing = stand_in(turn)
    if one_call and standing.get("tool_calls"):
        standing["tool_calls"] = standing["tool_calls"][:1]
    head = [{"role": "user", "content": MARK_USER}, standing]
    closed = render(head, False)
    after = render(head + messages, True)
    cut, end = last_end(closed, ends)
    opened = closed.find(MARK_USER) + len(MARK_USER)
    if cut <= opened:
        raise BridgeMismatch("the template writes no end-of-turn token after an assistant turn")
    # The stand-in may render otherwise once messages follow it (a think block only on the last turn, gpt-oss's
    # <|return|> that becomes <|end|>): its end is the first end token from where the two renders part.
    start = min(_diverge(after, closed), cut - len(end))
    if start < opened:
        raise BridgeMismatch(
            f"the template renders the turns before an assistant turn differently once messages follow it: "
            f"{closed[start : start + 60]!r} became {after[start : start + 60]!r}"
        )
    cut, end = _next_end(after, start, ends)
    if cut < 0:
        raise BridgeMismatch("no end-of-turn token after the stand-in assistant turn")
    return Bridged(after[cut:], end)


def last_end(text: str, ends: list[str]) -> tuple[int, str]:
    """(the offset just after the last end token in `text`, that token), (-1, "") when there is none."""
    found = max(((text.rfind(e), e) for e in ends), key=lambda item: item[0])
    return (found[0] + len(found[1]), found[1]) if found[0] >= 0 else (-1, "")


def id_form(render: Render) -> str:
    """The first form of tool-call ids the template accepts."""
    errors = []
    for form in ID_FORMS:
        try:
            render(probe(form)[:4], True)
            return form
        except (TemplateError, TypeError, ValueError, KeyError, AttributeError) as e:
            errors.append(f"{form}: {e}")
    raise BridgeMismatch(f"the template renders no tool call with any id form ({'; '.join(errors)})")


def probe(form: str) -> list[dict]:
    """The probe conversation (arguments in the compact JSON most templates print them in)."""
    one, two, three = (call_id(form) for _ in range(3))

    def call(id_, name, arguments):
        return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}

    return [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": None, "tool_calls": [call(one, "python", '{"code": "print(6*7)"}')]},
        {"role": "tool", "tool_call_id": one, "name": "python", "content": "42"},
        {"role": "assistant", "content": "It is 42."},
        {"role": "user", "content": "And the files here?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call(two, "bash", '{"cmd": "ls"}'), call(three, "python", '{"code": "1"}')],
        },
        {"role": "tool", "tool_call_id": two, "name": "bash", "content": "a.py"},
        {"role": "tool", "tool_call_id": three, "name": "python", "content": "1"},
    ]


@dataclass
class Checked:
    id_form: str  # "openai" (call_<24 hex>) or "alnum9"
    one_call: bool  # the template takes one call per assistant turn (Llama 3.x)


def check(render: Render, ends: list[str]) -> Checked:
    """Prove the bridge on the probe conversation (BridgeMismatch otherwise): at each model call after the
    first, the whole render must start as the first prompt did and end with the bridge (`_align`)."""
    try:
        form = id_form(render)
        messages = probe(form)
        try:
            render(messages, True)
            one_call = False
        except TemplateError:  # one call per turn (Llama 3.x raises on two): probe with one call and its result
            messages[6]["tool_calls"] = messages[6]["tool_calls"][:1]
            del messages[8]
            one_call = True
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        for index, turn in enumerate(turns):  # the prompt of each call after the first
            upto = turns[index + 1] if index + 1 < len(turns) else len(messages)
            text = bridge(render, ends, messages[turn], messages[turn + 1 : upto], one_call).text
            _align(render, ends, messages[:upto], turns[: index + 1], text)
    except (BridgeMismatch, TemplateError) as e:
        raise BridgeMismatch(str(e)) from e
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # the template itself fails on the probe
        raise BridgeMismatch(f"the template fails to render the probe conversation: {type(e).__name__}: {e}") from e
    return Checked(form, one_call)


def _align(render: Render, ends: list[str], messages: list[dict], turns: list[int], bridge_text: str) -> None:
    """The whole render of the conversation at a call starts with the first prompt (less its generation
    prompt) and ends with the bridge after the last assistant turn, behind an end token. What lies between is
    the history, fixed ids by then: the template may write earlier turns otherwise (reasoning dropped)."""
    whole = render(messages, True)
    first = _core(render, messages[: turns[0]])
    if not whole.startswith(first):
        at = _diverge(whole, first)
        raise BridgeMismatch(
            "the template renders the conversation's start differently once later messages exist (earlier text "
            f"moves, e.g. tools or the system prompt before the last user message): at {at}, the first prompt has "
            f"{first[at : at + 60]!r}, the whole conversation {whole[at : at + 60]!r}"
        )
    start = len(whole) - len(bridge_text)
    if not whole.endswith(bridge_text) or start < len(first) or not any(whole[:start].endswith(e) for e in ends):
        at = _diverge(whole[::-1], bridge_text[::-1])
        raise BridgeMismatch(
            f"the messages after assistant turn {len(turns)} render differently after an ended turn than in the whole "
            f"conversation: bridge {bridge_text[-at - 40 :][:120]!r}, whole {whole[-at - 40 :][:120]!r}"
        )


def _generation_prompt(render: Render, messages: list[dict]) -> str:
    """What add_generation_prompt changes at the end (some templates also close the last message otherwise)."""
    with_prompt = render(messages, True)
    return with_prompt[_diverge(with_prompt, render(messages, False)) :]


def _core(render: Render, messages: list[dict]) -> str:
    """The conversation's render without its generation prompt."""
    text = render(messages, True)
    return text[: len(text) - len(_generation_prompt(render, messages))]


def _next_end(text: str, start: int, ends: list[str]) -> tuple[int, str]:
    found = [(text.find(e, start), e) for e in ends if text.find(e, start) >= 0]
    if not found:
        return -1, ""
    at, end = min(found)
    return at + len(end), end


def _diverge(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)
