# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Claude Code (npm `@anthropic-ai/claude-code`), a CLI coding agent, run unchanged inside the rollout's
sandbox in its non-interactive mode (`claude -p`), from the prepared environment
.venvs/harnesses/claude_code (make setup: `npm install` of package.json here; its native binary is the
platform's optional dependency). It speaks Anthropic Messages (streamed) to the rollout's capture
endpoint (ANTHROPIC_BASE_URL on the sandbox's loopback) and acts on the workspace with its own tools.
Its nonessential traffic (telemetry, updates, error reports) is off: the sandbox has no network anyway.
"""

from __future__ import annotations

from prorl_gym.wire.resources import HarnessRunResponse
from responses_api_agents.prorl_agent.harness import HarnessExit, json_events_last_first

CLI_ENV = {
    "HOME": "/tmp/.claude-home",  # its settings and sessions: not in the task's tree
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "ANTHROPIC_API_KEY": "prorl-capture",
}


class ClaudeCode:
    """Settings: `cwd` (where it starts), `max_turns` (0: its own default), the model name it sends."""

    env = "claude_code"

    def __init__(self, cwd: str | None = "/workspace", max_turns: int = 0, model: str = "policy"):
        self.cwd, self.max_turns, self.model = cwd, max_turns, model

    def command(self) -> str:
        exports = " ".join(f"{k}={_quote(v)}" for k, v in CLI_ENV.items())
        turns = f" --max-turns {self.max_turns}" if self.max_turns else ""
        return "\n".join(
            [
                f'export {exports} ANTHROPIC_BASE_URL="${{PRORL_MODEL_URL%/v1}}"',
                'mkdir -p "$HOME"',
                'claude=$(ls "$PRORL_HARNESS_ENV"/node_modules/@anthropic-ai/claude-code-*/claude | head -n 1)',
                f'"$claude" -p "$(cat "$PRORL_TASK_FILE")" --dangerously-skip-permissions --output-format json '
                f"--model {_quote(self.model)}{turns} < /dev/null",
            ]
        )

    def exit_of(self, result: HarnessRunResponse) -> HarnessExit:
        """Its result line (--output-format json): `subtype` says how it ended (success, error_max_turns, ...)."""
        for summary in json_events_last_first(result.output):
            if summary.get("type") == "result":
                detail = "" if not summary.get("is_error") else str(summary.get("result") or "")[:200]
                return HarnessExit(status=str(summary.get("subtype") or "ended"), detail=detail)
        return HarnessExit(status="ended")


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "'\\''") + "'"
