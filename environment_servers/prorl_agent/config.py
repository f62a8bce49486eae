# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The config of a prorl_agent environment server, strict as every config a user writes (prorl_gym/config.py).

Kept apart from app.py, whose process only holds the server's place and imports nothing (the agent's process
serves the address: responses_api_agents/prorl_agent/front_door.py); tests/test_config.py validates each
shipped composition's environment servers with it."""

from __future__ import annotations

from nemo_gym.config_types import AgentServerRef, BaseRunServerInstanceConfig

from prorl_gym.config import StrictServerConfig


class ProrlAgentEnvironmentServerConfig(StrictServerConfig, BaseRunServerInstanceConfig):
    """No episode limits of its own (NeMo Gym's BaseEnvironmentServerConfig): the agent it names enforces its own."""

    agent_server: AgentServerRef  # the agent whose process serves this address


CONFIG = ProrlAgentEnvironmentServerConfig
