# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What every tool is: its arguments (validated), its schema, its handler, its result.

`content` is what the policy reads; `metadata` is structured detail for analysis (exit
code, timeout, truncation, duration).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.sandbox import SandboxAPI


class ToolResult(BaseModel):
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str  # what the policy reads in the tool's schema
    args: type[ToolArgs]
    # the handler; an environment's own tool that needs its server names the server's method instead
    run: Callable[[SandboxAPI, Any], Awaitable[ToolResult]] | str
    summary: str  # one clause for a system prompt: "`bash` runs shell commands"
    ends_rollout: bool = False  # calling it ends the rollout (e.g. submit): the agent stops after it

    def schema(self) -> dict:
        """Responses-API function tool (NeMo Gym rows carry this shape)."""
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": params,
            "strict": True,
        }


NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def describe_tools(tools: list[Tool]) -> str:
    """The sentence a system prompt uses to introduce `tools` (built from the config's list)."""
    if not tools:
        return "You have no tools."
    clauses = [tool.summary for tool in tools]
    listed = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
    count = NUMBERS[len(tools)] if len(tools) < len(NUMBERS) else str(len(tools))
    return f"You have {count} tool{'s' if len(tools) > 1 else ''}: {listed}."
