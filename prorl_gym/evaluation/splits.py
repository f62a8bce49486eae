# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Dataset splits per environment, as declared by each agent's `datasets:` in its YAML config."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from prorl_gym.environments import Split, UnknownEnvironment, environment
from prorl_gym.errors import ProrlError
from prorl_gym.paths import REPO_ROOT


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


def prepared(env: str, split: str, root: Path = REPO_ROOT) -> Split:
    """As `resolve`, but a split the environment's data/prepare.py writes is prepared first if it is
    missing (once: its file stays), with the script's own output as progress."""
    try:
        return resolve(env, split, root)
    except SplitError:
        chosen = next((s for s in splits(env, root) if split in (s.type, s.name)), None)
        script = environment(env, root).prepare_script
        if chosen is None or script is None or chosen.path.exists():
            raise
    where = chosen.path.relative_to(root)
    print(f"[eval] {where} is missing: preparing it with {script.relative_to(root)} (once)", file=sys.stderr)
    started = time.monotonic()
    run = subprocess.run([sys.executable, str(script)], cwd=root)
    if run.returncode != 0:
        raise SplitError(f"{script.relative_to(root)} failed ({run.returncode}); {where} was not written")
    print(f"[eval] prepared {env} data in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return resolve(env, split, root)
