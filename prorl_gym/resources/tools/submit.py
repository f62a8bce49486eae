# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`submit`: the policy says it is done. The tool ends the rollout (`ends_rollout`); what is
scored is the sandbox's state (e.g. the repository's diff), not the call."""

from __future__ import annotations

from pydantic import Field

from prorl_gym.resources.tools.base import Tool, ToolArgs, ToolResult
from prorl_gym.sandbox import SandboxAPI


class SubmitArgs(ToolArgs):
    note: str | None = Field(default=None, description="Optional: a short summary of what you did.")


async def run_submit(sandbox: SandboxAPI, args: SubmitArgs) -> ToolResult:
    return ToolResult(content="Submitted. Your changes will now be evaluated.", metadata={"note": args.note})


SUBMIT = Tool(
    name="submit",
    description="Call this when you are done: your changes in the workspace are then evaluated. No further tool calls.",
    args=SubmitArgs,
    run=run_submit,
    summary="`submit` ends the task",
    ends_rollout=True,
)
