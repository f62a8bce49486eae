# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Agent harnesses the RUN stage can run unchanged (harness.py): one folder each, with its own
requirements.txt (make setup installs them), chosen by the agent's `harness.kind`."""

from __future__ import annotations

import importlib
from typing import Any

KINDS = {"mini_swe_agent": "responses_api_agents.prorl_agent.harnesses.mini_swe_agent:MiniSweAgent"}


def load_harness(kind: str, settings: dict[str, Any]):
    """The harness of this kind, configured; a ValueError naming the kinds for an unknown one."""
    if kind not in KINDS:
        raise ValueError(f"unknown harness {kind!r}; known: {sorted(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)(**settings)
