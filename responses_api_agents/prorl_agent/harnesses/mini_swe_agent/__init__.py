# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""mini-swe-agent (PyPI `mini-swe-agent`), run unchanged, its DefaultAgent, its LitellmModel and its own
config (`mini`, its default, unless one is named), in either place:
- in the agent's process (MiniSweAgent), with an Environment of ours in place of its local or Docker
  one: its three methods over the rollout's sandbox (`execute` runs the command through the
  environment's bash tool, each in a fresh subshell of the task's directory as mini-swe-agent's own
  environments do, and ends the run on its submission command);
- inside the sandbox (MiniSweAgentCli): its own command line `mini` with its own LocalEnvironment,
  from the prepared environment .venvs/harnesses/mini_swe_agent.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import yaml

from prorl_gym.wire.resources import HarnessRunResponse
from responses_api_agents.prorl_agent.harness import HarnessExit, SandboxActions

# Before litellm is imported: no fetch of its price list (the cluster may have no internet), no
# banner, no cost errors for a self-hosted model, and no retries of its own (a failed call is the
# agent's to judge and retry, whole rollout at once).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")

SUBMIT_LINE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's own (environments/local.py)


class SandboxEnvironment:
    """mini-swe-agent's Environment protocol over the rollout's sandbox."""

    def __init__(self, sandbox: SandboxActions, cwd: str, env: dict[str, str] | None = None):
        self.sandbox, self.cwd, self.env = sandbox, cwd, dict(env or {})
        self.config = {"cwd": cwd, "env": self.env}

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        exports = "".join(f"export {k}={_quote(v)}; " for k, v in self.env.items())
        command = f"cd {_quote(cwd or self.cwd)} && ( {exports}\n{action.get('command', '')}\n)"
        output, code = self.sandbox.bash(command)
        result = {"output": output, "returncode": -1 if code is None else code, "exception_info": ""}
        lines = output.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_LINE and code == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )
        return result

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        # What its templates may ask of a machine ({{system}}, {{release}}, ...): the sandbox is Linux.
        uname = platform.uname()._asdict() | {"system": "Linux"}
        return uname | {"cwd": self.cwd} | kwargs

    def serialize(self) -> dict:
        return {"info": {"config": {"environment": self.config, "environment_type": "prorl_gym sandbox"}}}


class MiniSweAgent:
    """Settings: `config` (mini-swe-agent's own config file, by its name or path; its agent and model
    sections are used as they are), `cwd` (where commands run), `step_limit` (0: the config's), the
    model name sent to the policy."""

    def __init__(self, config: str = "mini", cwd: str = "/workspace", step_limit: int = 0, model: str = "policy"):
        from minisweagent.config import get_config_path

        self.settings = yaml.safe_load(get_config_path(config).read_text())
        self.cwd, self.step_limit, self.model = cwd, step_limit, model

    def run(self, task: str, sandbox: SandboxActions, model_base_url: str) -> HarnessExit:
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models.litellm_model import LitellmModel

        model_settings = dict(self.settings.get("model") or {})
        model_kwargs = dict(model_settings.pop("model_kwargs", None) or {})
        model_kwargs |= {"api_base": model_base_url, "api_key": "prorl-capture"}
        model_settings |= {"model_name": f"openai/{self.model}", "model_kwargs": model_kwargs}
        model_settings["cost_tracking"] = "ignore_errors"
        agent_settings = dict(self.settings.get("agent") or {})
        if self.step_limit:
            agent_settings["step_limit"] = self.step_limit
        agent_settings["cost_limit"] = 0  # a self-hosted policy costs nothing: limits are the capture's
        env = SandboxEnvironment(sandbox, self.cwd, (self.settings.get("environment") or {}).get("env"))
        agent = DefaultAgent(LitellmModel(**model_settings), env, **agent_settings)
        info = agent.run(task)
        return HarnessExit(status=str(info.get("exit_status") or "ended"))


# Its environment inside the sandbox: no first-run setup, its own files in /tmp (not the task's tree),
# and what the in-process placement sets above.
CLI_ENV = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/.mini-swe-agent",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
}
TRAJECTORY = "/tmp/.mini-swe-agent/run.traj.json"
EXIT_LINE = "prorl-harness-exit-status:"


class MiniSweAgentCli:
    """mini-swe-agent's command line inside the sandbox. Settings as MiniSweAgent's. `-I`: the task's
    PYTHONPATH (its repository, its test environment) stays the commands' and is not the harness's own."""

    env = "mini_swe_agent"

    def __init__(
        self, config: str = "mini", cwd: str | None = "/workspace", step_limit: int = 0, model: str = "policy"
    ):
        self.config, self.cwd, self.step_limit, self.model = config, cwd, step_limit, model

    def command(self) -> str:
        specs = [
            self.config,
            "model.model_kwargs.api_base=$PRORL_MODEL_URL",
            "model.model_kwargs.api_key=prorl-capture",
            "model.cost_tracking=ignore_errors",
            "agent.cost_limit=0",  # a self-hosted policy costs nothing: limits are the capture's
            *([f"agent.step_limit={self.step_limit}"] if self.step_limit else []),
        ]
        python = '"$PRORL_HARNESS_ENV/bin/python" -I'
        report = f"import json; print({EXIT_LINE!r}, json.load(open({TRAJECTORY!r}))['info']['exit_status'])"
        return "\n".join(
            [
                "export " + " ".join(f"{k}={_quote(v)}" for k, v in CLI_ENV.items()),
                f"{python} -m minisweagent.run.mini --yolo --exit-immediately --agent-class default "
                f'-t "$(cat "$PRORL_TASK_FILE")" -m {_quote("openai/" + self.model)} '
                + " ".join(f'-c "{spec}"' for spec in specs)
                + f" -o {TRAJECTORY}",
                "code=$?",
                f"{python} -c {_quote(report)} 2>/dev/null",
                "exit $code",
            ]
        )

    def exit_of(self, result: HarnessRunResponse) -> HarnessExit:
        lines = [line for line in result.output.splitlines() if line.startswith(EXIT_LINE)]
        return HarnessExit(status=lines[-1].removeprefix(EXIT_LINE).strip() if lines else "ended")


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "'\\''") + "'"
