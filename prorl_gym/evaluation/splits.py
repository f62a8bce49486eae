# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Dataset splits per environment, as declared by each agent's `datasets:` in its YAML config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from prorl_gym.errors import ProrlError
from prorl_gym.stack import REPO_ROOT

ENVS = ("math", "code", "stem", "swe")


@dataclass(frozen=True)
class Split:
    name: str  # e.g. math_validation
    type: str  # example | train | validation
    path: Path

    @property
    def generator(self) -> str | None:
        """The data/prepare_*.py script that writes this file, for files git does not track."""
        env = self.path.parts[-3] if len(self.path.parts) >= 3 else ""
        script = REPO_ROOT / "data" / f"prepare_{env}.py"
        return f"data/prepare_{env}.py" if script.exists() else None


class SplitError(ProrlError, ValueError):
    pass


def splits(env: str) -> list[Split]:
    if env not in ENVS:
        raise SplitError(f"unknown environment {env!r}; one of {', '.join(ENVS)}")
    config = yaml.safe_load((REPO_ROOT / "resources_servers" / env / "configs" / f"{env}.yaml").read_text())
    agent = config[f"{env}_agent"]["responses_api_agents"]["prorl_agent"]
    return [Split(d["name"], d["type"], REPO_ROOT / d["jsonl_fpath"]) for d in agent.get("datasets") or []]


def resolve(env: str, split: str) -> Split:
    """A split by type (validation) or name (math_validation); its file must exist."""
    known = splits(env)
    matches = [s for s in known if split in (s.type, s.name)]
    if not matches:
        listed = ", ".join(f"{s.type} ({s.name})" for s in known)
        raise SplitError(f"{env} has no split {split!r}; its splits: {listed}")
    chosen = matches[0]
    if not chosen.path.exists():
        how = (
            f"generate it with `.venv/bin/python {chosen.generator}` (or `make data`)"
            if chosen.generator
            else "it is not in the repo"
        )
        raise SplitError(f"{chosen.path.relative_to(REPO_ROOT)} ({env} {chosen.type}) does not exist: {how}")
    return chosen
