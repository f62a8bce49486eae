# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The tools a policy can call, by name. A resources server lists the ones it offers."""

from prorl_gym.resources.tools.base import Tool, ToolArgs, ToolResult, describe_tools
from prorl_gym.resources.tools.editor import EDITOR
from prorl_gym.resources.tools.shell import BASH, PYTHON
from prorl_gym.resources.tools.submit import SUBMIT

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (BASH, PYTHON, EDITOR, SUBMIT)}


__all__ = ["TOOLS", "Tool", "ToolArgs", "ToolResult", "describe_tools"]
