# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Regenerate each environment's data/example_rollouts.jsonl the NeMo Gym way.

Runs the scripted policy (gold actions; a stand-in for a GPU model) through ng_run and
ng_collect_rollouts over the environment's example.jsonl, and keeps the rollouts next to
it. (example_metrics.json comes from `ng_prepare_data ... +mode=example_validation`.)

    python -m prorl_gym.example_rollouts [math ...]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from prorl_gym.environments import discover
from prorl_gym.stack import Stack, run_cli


def main(names: list[str]) -> None:
    for env in discover():
        if names and env.name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            output = Path(tmp) / "rollouts.jsonl"
            with Stack(env.config_paths(), policy_data=[str(env.example)], log_dir=Path(tmp) / "logs") as stack:
                stack.collect(env.agent, env.example, output)
            target = env.example.with_name("example_rollouts.jsonl")
            shutil.copy(output, target)
            print(f"wrote {target}")


if __name__ == "__main__":
    run_cli(lambda: main(sys.argv[1:]))
