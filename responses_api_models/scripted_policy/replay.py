# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy's replay: which recorded step a conversation is at, as the harness at hand takes it.

It recognises a task by its first user message (or one a harness's own prompt wraps), replays the
recorded actions (scripts.py) for the request's mode (`metadata.scripted_mode`, else the model name
`scripted-<mode>`, else the server default), and draws which conversations are slow
(`metadata.scripted_slow`) and, in the coin mode, which samples are gold. app.py serves it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from pathlib import Path

from prorl_gym.scripted import MODES, Step, call
from prorl_gym.wire.resources import ENVIRONMENT_RESTARTED
from responses_api_models.scripted_policy.scripts import build_script

log = logging.getLogger(__name__)


def first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _steps_done(messages: list[dict]) -> int:
    """Assistant turns whose tools ran: a turn one of whose tool answers says the environment was
    restarted under it may have lost its effect (a write in a killed kernel), so it is done again,
    as a model reading that answer would."""
    turns, lost = 0, set()
    for message in messages:
        if message.get("role") == "assistant":
            turns += 1
        elif message.get("role") == "tool" and ENVIRONMENT_RESTARTED in _text(message.get("content")):
            lost.add(turns)
    return turns - len(lost)


def _text(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class ScriptedPolicy:
    def __init__(
        self,
        rows: list[dict],
        default_mode: str = "gold",
        tool_calls: int = 1,
        latency_s: float = 0.0,
        tool_aliases: dict[str, str] | None = None,
    ):
        if default_mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.default_mode = default_mode
        self.tool_calls = tool_calls
        self.latency_s = latency_s
        # recorded tool name -> the name to call it by (another stack's tool for the same actions)
        self.tool_aliases = tool_aliases or {}
        self._rows = {_key(first_user_text(row["responses_create_params"]["input"])): row for row in rows}
        self._scripts: dict[tuple[str, str], list[Step]] = {}
        self._coin: dict[str, int] = {}  # prompt -> conversations drawn in the coin mode
        # The "weights" it answers with (POST /weights, as a trainer loads new ones): once set, every answer's
        # text ends with WEIGHTS_MARK, so a test can tell which version produced which turn.
        self.weights_version: int | None = None
        self._draws = random.Random(0)  # which conversations are slow (metadata.scripted_slow)
        self._conversations: dict[tuple, int] = {}  # (stream, prompt) -> conversations started (scripted_slow)

    @classmethod
    def from_files(cls, paths: list[str | Path], **kwargs) -> ScriptedPolicy:
        rows = []
        for path in paths:
            with open(path) as f:
                rows.extend(json.loads(line) for line in f if line.strip())
        return cls(rows, **kwargs)

    def mode_for(self, body: dict) -> str:
        mode = (body.get("metadata") or {}).get("scripted_mode")
        model = body.get("model") or ""
        if not mode and model.startswith("scripted-"):
            mode = model.removeprefix("scripted-")
        return mode if mode in (*MODES, COIN) else self.default_mode

    def latency_for(self, body: dict) -> float:
        """`metadata.scripted_latency_ms` (a slow generation for one row), else the server's default."""
        value = (body.get("metadata") or {}).get("scripted_latency_ms")
        try:
            return max(0.0, float(value) / 1000) if value is not None else self.latency_s
        except (TypeError, ValueError):
            return self.latency_s

    def slow_factor(self, body: dict, messages: list[dict]) -> float | None:
        """With `metadata.scripted_slow`, the factor by which this conversation is slow (drawn at its first
        turn, read back from its first reply's SLOW_MARK), else None."""
        slow = (body.get("metadata") or {}).get("scripted_slow")
        if isinstance(slow, str):
            slow = json.loads(slow)
        if not isinstance(slow, dict):
            return None
        replies = [_text(m.get("content")) for m in messages if m.get("role") == "assistant"]
        if replies:
            drawn = SLOW_MARK in replies[0]
        else:
            seed, key = slow.get("seed"), _key(first_user_text(messages))
            counted = (slow.get("stream", seed), key)
            seen = self._conversations[counted] = self._conversations.get(counted, 0) + 1
            draws = self._draws if seed is None else random.Random(f"{seed}:{key}:{seen}")
            drawn = seen <= int(slow.get("first", 0)) or draws.random() < float(slow.get("p", 0.0))
        return float(slow.get("factor", 20.0)) if drawn else None

    def next_step(self, messages: list[dict], mode: str, tools: list[dict] | None = None) -> Step:
        names = {(t.get("function") or t).get("name") for t in tools or []}
        history = "".join(_text(m.get("content")) for m in messages if m.get("role") == "assistant")
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        return self.step_for(self.task_of(users), _steps_done(messages), mode, names, history)

    def task_of(self, texts: list[str]) -> str:
        """The user message that holds the task: the first one a script is known for (a harness may lead
        with its own, e.g. the Codex CLI's <environment_context>), else the first."""
        for text in texts:
            if _key(text) in self._rows or self._wrapped(_key(text), text) is not None:
                return text
        return texts[0] if texts else ""

    def step_for(
        self, first_user_text: str, turn: int, mode: str, tools: set[str] | None = None, history: str = ""
    ) -> Step:
        """What the script says at `turn` (0-based assistant turns) of the task with this first user message
        (or one that wraps it: a harness's own prompt around the task), with the tools the request offers.
        `history`: the conversation's earlier replies (the coin mode reads its draw there)."""
        key = _key(first_user_text)
        coin = None
        if mode == COIN:  # each new conversation of a prompt in turn gold, wrong, gold, ...: rewards that differ
            if turn == 0 or not (drawn := COIN_MARK.search(history)):
                coin = "gold" if self._coin.get(key, 0) % 2 == 0 else "wrong"
                self._coin[key] = self._coin.get(key, 0) + 1
            else:
                coin = drawn.group(1)
            mode = coin
        row = self._rows.get(key) or self._wrapped(key, first_user_text)
        if row is None:
            log.warning("scripted policy: no script for this prompt; answering that it has none")
            return Step(content="[scripted policy: no recorded actions for this task]")
        script = self._scripts.get((key, mode))
        if script is None:
            script = build_script(row, mode, tool_calls=self.tool_calls)
            if self.tool_aliases:
                script = [_aliased(step, self.tool_aliases) for step in script]
            self._scripts[(key, mode)] = script
        step = _as_instructed(script[min(turn, len(script) - 1)], first_user_text, tools or set())
        if self.weights_version is not None:
            step = Step(
                content=f"{step.content}{WEIGHTS_MARK.format(self.weights_version)}", tool_calls=step.tool_calls
            )
        if coin is not None and turn == 0:
            step = Step(content=f"{step.content} [sample: {coin}]", tool_calls=step.tool_calls)
        return step

    def _wrapped(self, key: str, text: str) -> dict | None:
        """The row whose first user message is inside `text` (the longest), remembered under its key."""
        inside = [
            row for row in self._rows.values() if first_user_text(row["responses_create_params"]["input"]) in text
        ]
        if not inside:
            return None
        row = self._rows[key] = max(inside, key=lambda r: len(first_user_text(r["responses_create_params"]["input"])))
        return row


# A harness that says how to submit (mini-swe-agent: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`) and offers
# no submit tool: a recorded `submit` is that command, run with its bash tool, as a model following the
# harness's instructions would.
SUBMIT_INSTRUCTION = re.compile(r"`(echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT[^`]*)`")
WEIGHTS_MARK = " [weights v{}]"
# metadata.scripted_mode "coin": a prompt's samples alternate gold and wrong (its first reply says which),
# so a group's rewards differ, as a real policy's do (dynamic sampling keeps such groups)
COIN = "coin"
COIN_MARK = re.compile(r"\[sample: (gold|wrong)\]")
# metadata.scripted_slow: said in the first reply of a conversation drawn slow, read back at its later turns
SLOW_MARK = "[pace: slow]"
# A harness whose run ends when the model answers without calling a tool (Claude Code): what it answers.
FINAL_ANSWER = "The fix is in place."


# A harness's shell tool under another name and argument (the Codex CLI's `exec_command` takes `cmd`): a recorded
# `bash` call is made with it when the harness offers no `bash`.
SHELL_TOOLS = {"exec_command": "cmd"}


def _as_instructed(step: Step, prompt: str, tools: set[str]) -> Step:
    """A recorded step as the harness at hand takes it: its tools by their own names (Claude Code's `Bash`,
    the Codex CLI's `exec_command`), a submission as its instructions say (a command, or a last answer without
    a tool call)."""
    if tools:  # recorded names matched to the offered ones regardless of case
        offered = {name.lower(): name for name in tools}
        step = Step(content=step.content, tool_calls=[_offered(c, offered) for c in step.tool_calls])
    if not any(c["name"] == "submit" for c in step.tool_calls) or "submit" in tools:
        return step
    if said := SUBMIT_INSTRUCTION.search(prompt):
        bash = offered.get("bash", "bash") if tools else "bash"
        calls = [call(bash, {"command": said.group(1)}) if c["name"] == "submit" else c for c in step.tool_calls]
        return Step(content=step.content, tool_calls=calls)
    if tools:  # tools offered, none to submit with, no instruction: the harness ends on an answer
        return Step(content=FINAL_ANSWER, tool_calls=[])
    return step


def _offered(recorded: dict, offered: dict[str, str]) -> dict:
    """A recorded call by the name the harness offers its tool under (and that tool's argument names)."""
    name = recorded["name"].lower()
    if name == "bash" and name not in offered:
        for tool, argument in SHELL_TOOLS.items():
            if tool in offered:
                try:
                    arguments = json.loads(recorded["arguments"])
                except ValueError:  # a malformed call stays malformed
                    return recorded | {"name": offered[tool]}
                renamed = {argument if key == "command" else key: value for key, value in arguments.items()}
                return call(offered[tool], renamed)
    return recorded | {"name": offered.get(name, recorded["name"])}


def _aliased(step: Step, aliases: dict[str, str]) -> Step:
    calls = [call | {"name": aliases.get(call["name"], call["name"])} for call in step.tool_calls]
    return Step(content=step.content, tool_calls=calls)
