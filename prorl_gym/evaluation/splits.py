# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Dataset splits per environment, as declared by each agent's `datasets:` in its YAML config."""

from __future__ import annotations

from pathlib import Path

from prorl_gym.environments import REPO_ROOT, Split, UnknownEnvironment, environment
from prorl_gym.errors import ProrlError


class SplitError(ProrlError, ValueError):
    pass


def splits(env: str, root: Path = REPO_ROOT) -> list[Split]:
    try:
        return environment(env, root).splits
    except UnknownEnvironment as exc:
        raise SplitError(str(exc)) from None


def resolve(env: str, split: str, root: Path = REPO_ROOT) -> Split:
    """A split by type (validation) or name (math_validation); its file must exist."""
    known = splits(env, root)
    matches = [s for s in known if split in (s.type, s.name)]
    if not matches:
        listed = ", ".join(f"{s.type} ({s.name})" for s in known)
        raise SplitError(f"{env} has no split {split!r}; its splits: {listed}")
    chosen = matches[0]
    if not chosen.path.exists():
        script = environment(env, root).prepare_script
        how = (
            f"generate it with `.venv/bin/python {script.relative_to(root)}` (or `make data`)"
            if script
            else "it is not in the repo"
        )
        raise SplitError(f"{chosen.path.relative_to(root)} ({env} {chosen.type}) does not exist: {how}")
    return chosen
