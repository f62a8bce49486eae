# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Agent harnesses the RUN stage can run unchanged (harness.py): one folder each, with its own
requirements.txt (Python) or package.json (npm), chosen by the agent's `harness.kind` and
`harness.placement`: in the agent's process (make setup installs the requirements into .venv), or
inside the rollout's sandbox (from .venvs/harnesses/<kind>, which make setup builds from them)."""

from __future__ import annotations

import importlib
from typing import Any

MODULE = "responses_api_agents.prorl_agent.harnesses"
KINDS = {  # kind -> placement -> its class
    "mini_swe_agent": {
        "agent": f"{MODULE}.mini_swe_agent:MiniSweAgent",
        "sandbox": f"{MODULE}.mini_swe_agent:MiniSweAgentCli",
    },
    "claude_code": {"sandbox": f"{MODULE}.claude_code:ClaudeCode"},
    "codex": {"sandbox": f"{MODULE}.codex:Codex"},
    "opencode": {"sandbox": f"{MODULE}.opencode:OpenCode"},
}


def load_harness(kind: str, settings: dict[str, Any], placement: str = "agent"):
    """The harness of this kind for this placement, configured; a ValueError naming what is known otherwise."""
    if kind not in KINDS:
        raise ValueError(f"unknown harness {kind!r}; known: {sorted(KINDS)}")
    if placement not in KINDS[kind]:
        raise ValueError(f"harness {kind!r} cannot run in the {placement}; it runs in: {sorted(KINDS[kind])}")
    module, name = KINDS[kind][placement].split(":")
    return getattr(importlib.import_module(module), name)(**settings)
