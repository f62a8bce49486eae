# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""OpenCode (npm `opencode-ai`), a CLI coding agent, run unchanged inside the rollout's sandbox in its
non-interactive mode (`opencode run --format json`), from the prepared environment .venvs/harnesses/opencode
(make setup: `npm install` of package.json here; its binary is the platform's optional dependency). It
speaks streamed chat completions (its AI SDK's OpenAI-compatible provider, bundled in the binary) to the
rollout's capture endpoint on the sandbox's loopback and acts on the workspace with its own tools (bash, edit,
read, ...). Its config lives outside the workspace (OPENCODE_CONFIG), so the graded tree holds only what the
agent did; a fixed session title spares the title-generating model call, `--pure` its plugins, `--auto` the
permission prompts (the rollout's sandbox is the boundary); the model list it fetches at start fails (no
network) and it goes on without it.
"""

from __future__ import annotations

import json

from prorl_gym.wire.resources import HarnessRunResponse
from responses_api_agents.prorl_agent.harness import HarnessExit, json_events_last_first

MODEL_URL = "PRORL_MODEL_URL_IN_CONFIG"  # replaced by the sandbox's capture URL when the config is written


class OpenCode:
    """Settings: `cwd` (where it starts), the model name it sends."""

    env = "opencode"

    def __init__(self, cwd: str | None = "/workspace", model: str = "policy"):
        self.cwd, self.model = cwd, model

    def config(self) -> str:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "capture",
            "options": {"baseURL": MODEL_URL, "apiKey": "prorl-capture"},
            "models": {self.model: {"name": self.model}},
        }
        config = {"provider": {"capture": provider}, "model": f"capture/{self.model}", "autoupdate": False}
        return json.dumps(config | {"share": "disabled"})

    def command(self) -> str:
        return "\n".join(
            [
                "export HOME=/tmp/.opencode-home OPENCODE_CONFIG=/tmp/.opencode-home/opencode.json",
                "export OPENCODE_DISABLE_AUTOUPDATE=1",
                'mkdir -p "$HOME"',
                f'printf \'%s\' {_quote(self.config())} | sed "s|{MODEL_URL}|$PRORL_MODEL_URL|" > "$OPENCODE_CONFIG"',
                'opencode=$(ls "$PRORL_HARNESS_ENV"/node_modules/opencode-linux-*/bin/opencode | head -n 1)',
                f'"$opencode" run --title prorl --pure --auto --format json --model capture/{_quote(self.model)} '
                '"$(cat "$PRORL_TASK_FILE")" < /dev/null',
            ]
        )

    def exit_of(self, result: HarnessRunResponse) -> HarnessExit:
        """Its last event (--format json): an error, or the reason its last step finished (stop: it answered)."""
        for event in json_events_last_first(result.output):
            if event.get("type") == "error":
                return HarnessExit(status="error", detail=json.dumps(event.get("error"))[:200])
            if event.get("type") == "step_finish":
                return HarnessExit(status=str((event.get("part") or {}).get("reason") or "ended"))
        return HarnessExit(status="ended")


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "'\\''") + "'"
