# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""How each CLI harness's ending is read from its output (harness.py's json_events_last_first and each
harness's exit_of); the harnesses themselves run end to end in test_harness.py (slow tier)."""

from __future__ import annotations

import json

import pytest

from prorl_gym.wire.resources import HarnessRunResponse
from responses_api_agents.prorl_agent.harness import HarnessExit, json_events_last_first
from responses_api_agents.prorl_agent.harnesses.claude_code import ClaudeCode
from responses_api_agents.prorl_agent.harnesses.codex import Codex
from responses_api_agents.prorl_agent.harnesses.opencode import OpenCode


def ran(*lines) -> HarnessRunResponse:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    return HarnessRunResponse(exit_code=0, timed_out=False, output=text, duration_s=1.0)


def test_events_are_the_json_objects_of_the_output_last_first():
    output = ran("starting", {"n": 1}, "[1, 2]", '{"broken', {"n": 2}, "").output
    assert list(json_events_last_first(output)) == [{"n": 2}, {"n": 1}]


@pytest.mark.parametrize(
    "harness, lines, expected",
    [
        (Codex(), [{"type": "turn.started"}, {"type": "turn.completed"}, "bye"], HarnessExit("completed")),
        (
            Codex(),
            [{"type": "turn.failed", "error": {"message": "quota"}}, {"type": "item.completed"}],
            HarnessExit("failed", "quota"),
        ),
        (OpenCode(), [{"type": "step_finish", "part": {"reason": "stop"}}], HarnessExit("stop")),
        (
            OpenCode(),
            [{"type": "step_finish"}, {"type": "error", "error": {"x": 1}}],
            HarnessExit("error", '{"x": 1}'),
        ),
        (ClaudeCode(), [{"type": "result", "subtype": "success", "is_error": False}], HarnessExit("success")),
        (
            ClaudeCode(),
            [{"type": "result", "subtype": "error_max_turns", "is_error": True, "result": "turns"}],
            HarnessExit("error_max_turns", "turns"),
        ),
    ],
)
def test_each_harness_says_how_it_ended_from_its_last_event(harness, lines, expected):
    assert harness.exit_of(ran(*lines)) == expected


@pytest.mark.parametrize("harness", [Codex(), OpenCode(), ClaudeCode()])
def test_output_without_its_events_is_an_ending_without_a_word(harness):
    assert harness.exit_of(ran("Segmentation fault", "[]")) == HarnessExit("ended")
