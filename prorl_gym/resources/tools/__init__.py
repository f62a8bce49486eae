# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The tools a policy can call, by name. A resources server lists the ones it offers."""

from prorl_gym.resources.tools.base import Tool, ToolArgs, ToolResult, describe_tools
from prorl_gym.resources.tools.editor import EDITOR
from prorl_gym.resources.tools.shell import BASH, PYTHON
from prorl_gym.resources.tools.submit import SUBMIT

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (BASH, PYTHON, EDITOR, SUBMIT)}


def tools_sentence(environment: str, own_tools: tuple[Tool, ...] = ()) -> str:
    """How a system prompt introduces the tools the environment's config lists (the one list)."""
    from prorl_gym.environments import environment as find

    known = TOOLS | {tool.name: tool for tool in own_tools}
    return describe_tools([known[name] for name in find(environment).tools])


__all__ = ["TOOLS", "Tool", "ToolArgs", "ToolResult", "describe_tools", "tools_sentence"]
