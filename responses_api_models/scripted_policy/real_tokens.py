# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy with a real model's tokenizer and chat template: a template-faithful stand-in for
vLLM serving that model (Qwen3 by default), for what token ids do on each route.

Chat route (/v1/chat/completions), as vLLM's: the conversation is rendered by the real template, tool-
call arguments re-serialised, earlier reasoning passed back as `reasoning_content`, then tokenized;
the generation is read back by emulations of vLLM's qwen3 reasoning parser and hermes tool parser.
Completion route (/v1/completions with a token-id prompt), as vLLM's: the prompt ids are taken as they
are; no parser runs. /tokenize (chat messages or a prompt, `return_token_strs`) and /detokenize too.

What the model "samples" for a step of the script: `<think>` reasoning (unless the template's
`enable_thinking` is false: then the generation prompt holds an empty think block, which the template
leaves out of earlier turns), the content, hermes tool calls, the end of turn, tokenized canonically,
except where the conversation asks for a drift case. A row's first user message may name cases as
`[drift: case, ...]`, so both routes see them; each is something a real model does that a re-rendered
history does not reproduce:

  think_newlines   `<think>\\n\\nreasoning\\n\\n</think>` (the template strips the newlines back)
  space_before_call   content, then "\\n\\n" before <tool_call> (the hermes parser keeps it as content
                   and the template adds a newline of its own)
  compact_json     tool-call JSON without spaces (the template prints it with)
  split            " should" sampled as " sh" + "ould" (re-tokenized as one token)
  leading_newline  the generation starts with "\\n" (re-rendered, it merges with the prompt's)
  endoftext        the turn ends with <|endoftext|> (re-rendered with <|im_end|>)

With no case, a conversation re-renders exactly as it was generated (the control).

A family other than Qwen's (`--tokenizer llama3`, ... : prorl_gym/tokens/families.py) answers on the
token-id routes only: each step sampled as its template writes that turn (`split` and `leading_newline`
apply), the conversation read back by its template's assistant header; the task is found by the rows'
user messages inside the prompt.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import NamedTuple

from prorl_gym.scripted import Step
from prorl_gym.tokens.parsers import parse
from prorl_gym.tokens.template import normalized, text_of
from prorl_gym.tokens.tokenizer import LocalTokenizer

DRIFT_CASES = (
    "think_newlines",
    "space_before_call",
    "compact_json",
    "split",
    "leading_newline",
    "endoftext",
)
DRIFT = re.compile(r"\[drift: ([a-z_, ]+)\]")
REASONING = "I should check the task with a tool before answering."


def drift_cases(first_user_text: str) -> set[str]:
    found = DRIFT.search(first_user_text)
    cases = {c.strip() for c in found.group(1).split(",")} if found else set()
    if unknown := cases - set(DRIFT_CASES):
        raise ValueError(f"unknown drift cases {sorted(unknown)}; known: {DRIFT_CASES}")
    return cases


class RealTokens:
    def __init__(self, tokenizer: LocalTokenizer):
        self.tokenizer = tokenizer
        source = tokenizer.template.source if tokenizer.template else ""
        self.qwen = "<|im_start|>" in source  # Qwen's ChatML, its hermes calls and think blocks
        if not self.qwen and tokenizer.template is not None:  # what opens an assistant turn
            user = [{"role": "user", "content": "u"}]
            opened = tokenizer.render(user, None, True)
            self.header = opened[len(tokenizer.render(user, None, False)) :]

    # ------------------------------------------------------------------ what vLLM renders
    def chat_prompt(self, messages: list[dict], tools: list[dict] | None, kwargs: dict) -> list[int]:
        """vLLM's chat route: earlier turns re-rendered from their parsed content, then tokenized."""
        return self.tokenizer.encode(self.tokenizer.render([_as_vllm(m) for m in messages], tools, True, **kwargs))

    def tokenize(self, body: dict) -> dict:
        if "messages" in body:
            kwargs = body.get("chat_template_kwargs") or {}
            text = self.tokenizer.render(
                [_as_vllm(m) for m in body["messages"]],
                body.get("tools"),
                body.get("add_generation_prompt", True),
                **kwargs,
            )
        else:
            text = body.get("prompt", "")
        tokens = self.tokenizer.encode(text)
        bos = self.tokenizer.token_id(self.tokenizer.config.get("bos_token") or "")
        if "messages" not in body and body.get("add_special_tokens", True) and bos is not None:
            tokens = [bos, *tokens]  # as vLLM: a prompt gets the tokenizer's BOS unless told otherwise
        out = {"count": len(tokens), "max_model_len": 1 << 20, "tokens": tokens}
        if body.get("return_token_strs"):
            out["token_strs"] = [self.tokenizer.token(t) for t in tokens]
        return out

    # ------------------------------------------------------------------ what the model samples
    def generate(self, step: Step, thinking: bool, cases: set[str]) -> list[int]:
        if not self.qwen:
            return self._as_templated(step, cases)
        tok = self.tokenizer
        content = step.content
        if "space_before_call" in cases and step.tool_calls:
            content = (content or "Let me check.") + "\n\n"
        calls = "".join(
            ("\n" if i or content else "")
            + "<tool_call>\n"
            + _call_json(c, "compact_json" in cases)
            + "\n</tool_call>"
            for i, c in enumerate(step.tool_calls)
        )
        think = ""
        if thinking:
            gap = "\n\n" if "think_newlines" in cases else "\n"
            think = f"<think>{gap}{REASONING}{gap}</think>\n\n"
        end = "<|endoftext|>" if "endoftext" in cases else tok.eos_token
        ids = tok.encode(think + content + calls + end)
        if "split" in cases:
            ids = _split(tok, ids, " should")
        if "leading_newline" in cases:
            ids = tok.encode("\n") + ids
        return ids

    def _as_templated(self, step: Step, cases: set[str]) -> list[int]:
        """The step as the template writes an assistant turn (its first call where it takes one a turn)."""
        tok, user = self.tokenizer, [{"role": "user", "content": "u"}]
        calls = [
            {
                "id": f"call{i:05d}xx"[:9],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(step.tool_calls)
        ]
        message = {"role": "assistant", "content": step.content or None} | ({"tool_calls": calls} if calls else {})
        try:
            whole = tok.render([*user, message], None, False)
        except Exception:  # noqa: BLE001 - a template that takes one call a turn (Llama 3.x raises on two)
            whole = tok.render([*user, message | {"tool_calls": calls[:1]}], None, False)
        text = whole[len(tok.render(user, None, True)) :]
        end, at = min((text.find(tok.token(e)), e) for e in tok.end_ids if tok.token(e) in text)[::-1]
        ids = tok.encode(text[:at])
        if "split" in cases:
            ids = _split(tok, ids, " should")
        if "leading_newline" in cases:
            ids = tok.encode("\n") + ids
        return [*ids, end]

    def logprobs(self, ids: list[int]) -> list[float]:
        return [-0.01 * (1 + t % 7) for t in ids]  # deterministic, plausible

    # ------------------------------------------------------------------ what vLLM's parsers return
    def chat_message(self, ids: list[int], tools_offered: bool) -> tuple[dict, str]:
        """(message, finish_reason) as vLLM's chat route returns them (qwen3 + hermes parsers)."""
        text = self.tokenizer.decode(ids)
        for end in self.tokenizer.end_ids:
            text = text.removesuffix(self.tokenizer.token(end))
        turn = parse(text, "hermes" if tools_offered else "none", "think", malformed="content")
        calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": c} for c in turn.tool_calls]
        message = {"role": "assistant", "content": turn.content or None, "tool_calls": calls or None}
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        return message, "tool_calls" if calls else "stop"

    # ------------------------------------------------------------------ reading a token-id prompt
    def conversation_of(self, prompt: list[int]) -> Conversation:
        """What the policy reads of a rendered conversation (decoded once)."""
        text = self.tokenizer.decode(prompt)
        if not self.qwen:  # the rows' user messages are found inside the whole text
            names = set(re.findall(r'"name": "([^"]+)"', text))
            return Conversation(
                users=[text], turns=text.count(self.header) - 1, thinking=False, tools=names, text=text
            )
        users = [part.split(self.tokenizer.eos_token, 1)[0] for part in text.split("<|im_start|>user\n")[1:]]
        return Conversation(
            users=users or [text],
            turns=text.count("<|im_start|>assistant\n") - 1,
            thinking=not text.endswith("<think>\n\n</think>\n\n"),
            tools=_tools_in(text),
            text=text,
        )


class Conversation(NamedTuple):
    users: list[str]  # its user messages, in order
    turns: int  # assistant turns so far
    thinking: bool  # thinking on
    tools: set[str]  # the names of the tools it offers
    text: str  # the whole of it


def _tools_in(text: str) -> set[str]:
    """The tools a rendered conversation offers (one JSON object a line in its <tools> block)."""
    if "<tools>\n" not in text:  # the block; the system text before it names the tags inline
        return set()
    names = set()
    for line in text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines():
        try:
            tool = json.loads(line)
        except ValueError:
            continue
        names.add((tool.get("function") or tool).get("name"))
    return names - {None}


def _as_vllm(message: dict) -> dict:
    """An assistant turn as NeMo Gym sends it and vLLM renders it: content without its think block
    (passed back as reasoning_content), arguments as JSON objects."""
    message = normalized(message)
    if message.get("role") == "assistant":
        content = text_of(message.get("content"))
        if "</think>" in content and message.get("reasoning_content") is None:
            reasoning, _, content = content.partition("</think>")
            message["reasoning_content"] = reasoning.split("<think>", 1)[-1].strip("\n")
        message["content"] = content
    return message


def _call_json(call: dict, compact: bool) -> str:
    arguments = call["arguments"]
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:  # a malformed call: written as the script has it
        return '{"name": "' + call["name"] + '", "arguments": ' + arguments + "}"
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps({"name": call["name"], "arguments": value}, ensure_ascii=False, separators=separators)


def _split(tok: LocalTokenizer, ids: list[int], word: str) -> list[int]:
    """One token of `word` sampled as two that spell it (a non-canonical split)."""
    (whole,) = tok.encode(word)
    head, tail = tok.encode(word[:3]), tok.encode(word[3:])
    if whole not in ids:
        return ids
    at = ids.index(whole)
    return ids[:at] + head + tail + ids[at + 1 :]
