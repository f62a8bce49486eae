# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Environments are discovered, not listed: one folder each under resources_servers/.

A folder is an environment when its `configs/*.yaml` defines a resources server and an
agent that drives it (NeMo Gym's shape: app.py, configs/, data/ with example.jsonl and its
own prepare.py, tests/, README.md, requirements.txt). The demo, the evaluation command, the
end-to-end tests, `make data` and the ng_run compositions in configs/ all come from here, so
adding an environment is adding its folder.

    python -m prorl_gym.environments            list them
    python -m prorl_gym.environments configs    write configs/<env>.yaml and configs/all.yaml
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from prorl_gym.errors import ProrlError
from prorl_gym.paths import REPO_ROOT
from prorl_gym.wire.records import ReportFields

if TYPE_CHECKING:
    from prorl_gym.resources.tools import Tool

BASE_CONFIG = "configs/base.yaml"
POLICY_CONFIG = "responses_api_models/balanced_vllm_model/configs/balanced_vllm_model.yaml"


class UnknownEnvironment(ProrlError, LookupError):
    pass


@dataclass(frozen=True)
class Split:
    name: str  # e.g. math_validation
    type: str  # example | train | validation
    path: Path


@dataclass(frozen=True)
class Environment:
    name: str  # the resources server's instance name in config, e.g. "math"
    folder: Path  # resources_servers/<folder>/
    config_path: Path  # its configs/<name>.yaml
    agent: str  # the agent instance that drives it, e.g. "math_agent"
    config: dict[str, Any]  # the whole YAML

    @property
    def root(self) -> Path:
        return self.folder.parent.parent

    @property
    def server_config(self) -> dict[str, Any]:
        return next(iter(self.config[self.name]["resources_servers"].values()))

    @property
    def agent_config(self) -> dict[str, Any]:
        return next(iter(self.config[self.agent]["responses_api_agents"].values()))

    @property
    def environment_server(self) -> str | None:
        """The environment server its config declares for its agent (NeMo Gym 0.7 collects through it; the
        agent's process serves it: environment_servers/prorl_agent), None if it declares none."""
        for name, value in self.config.items():
            for server in ((value or {}).get("environment_servers") or {}).values() if isinstance(value, dict) else ():
                if ((server or {}).get("agent_server") or {}).get("name") == self.agent:
                    return name
        return None

    @property
    def server_key(self) -> str:
        """Where its resources server's config lives, for overrides: +<server_key>.sandbox.root_dir=..."""
        return f"{self.name}.resources_servers.{next(iter(self.config[self.name]['resources_servers']))}"

    @property
    def agent_key(self) -> str:
        """Where its agent's config lives, for overrides: +<agent_key>.limits.max_turns=..."""
        return f"{self.agent}.responses_api_agents.{next(iter(self.config[self.agent]['responses_api_agents']))}"

    @property
    def report(self) -> ReportFields:
        """The record fields of its own the evaluation report summarises (`report:` in its config)."""
        return ReportFields.model_validate(self.server_config.get("report") or {})

    @property
    def tools(self) -> list[str]:
        return list(self.server_config.get("tools") or [])

    @cached_property
    def splits(self) -> list[Split]:
        return [
            Split(d["name"], d["type"], self.root / d["jsonl_fpath"]) for d in self.agent_config.get("datasets") or []
        ]

    @property
    def example(self) -> Path:
        """The example rows (NeMo Gym's 5-row example.jsonl)."""
        examples = [s.path for s in self.splits if s.type == "example"]
        return examples[0] if examples else self.folder / "data" / "example.jsonl"

    @property
    def prepare_script(self) -> Path | None:
        """The script that writes this environment's data files (data/prepare.py), if any."""
        script = self.folder / "data" / "prepare.py"
        return script if script.exists() else None

    def config_paths(self) -> list[str]:
        """What ng_run needs to serve this environment alone: base, the environment, the policy model server."""
        return [BASE_CONFIG, str(self.config_path.relative_to(self.root)), POLICY_CONFIG]


def _environments_in(config_path: Path) -> list[Environment]:
    config = yaml.safe_load(config_path.read_text()) or {}
    servers = [key for key, value in config.items() if isinstance(value, dict) and "resources_servers" in value]
    found = []
    for name in servers:
        agents = [
            key
            for key, value in config.items()
            if isinstance(value, dict)
            and any(
                (agent or {}).get("resources_server", {}).get("name") == name
                for agent in (value.get("responses_api_agents") or {}).values()
            )
        ]
        if agents:
            found.append(Environment(name, config_path.parent.parent, config_path, agents[0], config))
    return found


def discover(root: Path = REPO_ROOT) -> list[Environment]:
    """Every environment under root/resources_servers, by name."""
    found = [env for path in sorted(root.glob("resources_servers/*/configs/*.yaml")) for env in _environments_in(path)]
    return sorted(found, key=lambda env: env.name)


def environment(name: str, root: Path = REPO_ROOT) -> Environment:
    envs = discover(root)
    for env in envs:
        if env.name == name:
            return env
    raise UnknownEnvironment(f"unknown environment {name!r}; found: {', '.join(e.name for e in envs)}")


def all_config_paths(envs: list[Environment]) -> list[str]:
    """One ng_run for all of `envs`: base, each environment, the policy model server."""
    return [BASE_CONFIG, *(str(env.config_path.relative_to(env.root)) for env in envs), POLICY_CONFIG]


def write_compositions(root: Path = REPO_ROOT) -> list[Path]:
    """configs/<env>.yaml for each environment and configs/all.yaml, for `ng_run "+config_paths=[...]"`."""
    envs = discover(root)
    written = []
    header = (
        "# Generated by `python -m prorl_gym.environments configs` (make setup) from resources_servers/*/configs.\n"
    )
    compositions = {
        env.name: (env.config_paths(), f"# {env.name}: its resources server, agent and the policy model server.\n")
        for env in envs
    }
    compositions["all"] = (all_config_paths(envs), "# Every environment behind one ng_run, one policy model server.\n")
    for name, (paths, what) in compositions.items():
        target = root / "configs" / f"{name}.yaml"
        text = header + what + yaml.safe_dump({"config_paths": paths}, sort_keys=False)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    if argv[:1] == ["configs"]:
        for path in write_compositions():
            print(path.relative_to(REPO_ROOT))
        return 0
    for env in discover():
        print(f"{env.name:8} agent {env.agent:14} tools {','.join(env.tools):24} {env.folder.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def tools_sentence(name: str, own_tools: tuple[Tool, ...] = ()) -> str:
    """How a system prompt introduces the tools environment `name`'s config lists (the one list)."""
    # Here, not at the top: the tools import NeMo Gym (seconds of CPU) that discovery and `make configs` need not.
    from prorl_gym.resources.tools import TOOLS, describe_tools

    known = TOOLS | {tool.name: tool for tool in own_tools}
    return describe_tools([known[tool] for tool in environment(name).tools])
