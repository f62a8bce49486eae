# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The OpenAI Codex CLI (npm `@openai/codex`), run unchanged inside the rollout's sandbox in its
non-interactive mode (`codex exec --json`), from the prepared environment .venvs/harnesses/codex (make setup:
`npm install` of package.json here; its static binary is the platform's optional dependency, so no Node runs
in the sandbox). It speaks the streaming Responses API to the rollout's capture endpoint (a model provider of
its own in its config, on the sandbox's loopback) and acts on the workspace with its own tools (exec_command).
Its own sandbox is off (the rollout's is the boundary) and so is everything that would reach out: analytics,
update checks, web search, history on disk; the sandbox has no network anyway. Its config is written as NeMo
Gym 0.7's codex_agent writes it.
"""

from __future__ import annotations

from prorl_gym.wire.resources import HarnessRunResponse
from responses_api_agents.prorl_agent.harness import HarnessExit, json_events_last_first

CONFIG = """\
model_provider = "capture"
model = "{model}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
web_search = "disabled"
check_for_update_on_startup = false
[analytics]
enabled = false
[history]
persistence = "none"
[features]
multi_agent = false
code_mode = false
[model_providers.capture]
name = "capture"
base_url = "$PRORL_MODEL_URL"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
stream_idle_timeout_ms = {idle_ms}
"""


class Codex:
    """Settings: `cwd` (where it starts), the model name it sends, how long a call may stay silent (`idle_s`)."""

    env = "codex"

    def __init__(self, cwd: str | None = "/workspace", model: str = "policy", idle_s: float = 600.0):
        self.cwd, self.model, self.idle_s = cwd, model, idle_s

    def command(self) -> str:
        config = CONFIG.format(model=self.model, idle_ms=int(self.idle_s * 1000))
        return "\n".join(
            [
                "export CODEX_HOME=/tmp/.codex-home HOME=/tmp/.codex-home OPENAI_API_KEY=prorl-capture",
                'mkdir -p "$CODEX_HOME"',
                f'cat > "$CODEX_HOME/config.toml" <<PRORL_CODEX_CONFIG\n{config}PRORL_CODEX_CONFIG',
                'codex=$(ls "$PRORL_HARNESS_ENV"/node_modules/@openai/codex-linux-*/vendor/*/bin/codex | head -n 1)',
                '"$codex" exec --json --ephemeral --skip-git-repo-check --cd "$PWD" -- "$(cat "$PRORL_TASK_FILE")" '
                "< /dev/null",
            ]
        )

    def exit_of(self, result: HarnessRunResponse) -> HarnessExit:
        """Its last turn event (--json): turn.completed, or turn.failed with the error."""
        for event in json_events_last_first(result.output):
            if event.get("type") in ("turn.completed", "turn.failed"):
                detail = str((event.get("error") or {}).get("message") or "")[:200]
                return HarnessExit(status=event["type"].removeprefix("turn."), detail=detail)
        return HarnessExit(status="ended")
