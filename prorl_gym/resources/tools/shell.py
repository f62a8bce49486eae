# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The shell tools: `bash` (persistent pty shell) and `python` (persistent IPython kernel)."""

from __future__ import annotations

from pydantic import Field

from prorl_gym.resources.tools.base import Tool, ToolArgs, ToolResult
from prorl_gym.sandbox import SandboxAPI
from prorl_gym.wire.resources import ENVIRONMENT_RESTARTED


class BashArgs(ToolArgs):
    command: str = Field(description="The bash command to run.")


class PythonArgs(ToolArgs):
    code: str = Field(description="Python code to run.")


# bash reports death by signal as 128 + signal; these are the sandbox's limits at work.
LIMIT_EXITS = {137: "killed (SIGKILL)", 152: "killed: CPU time limit", 153: "killed: file size limit"}


def _content(output: str, exit_code: int | None, timed_out: bool, restarted: bool, timeout: float) -> str:
    """What the policy reads: the output, then one bracketed line for anything unusual."""
    notes = []
    if timed_out:
        notes.append(f"timed out after {timeout:g}s and was interrupted")
    if restarted:
        notes.append(ENVIRONMENT_RESTARTED)
    if exit_code not in (0, None) and not timed_out:
        notes.append(f"exit code {exit_code}" + (f", {LIMIT_EXITS[exit_code]}" if exit_code in LIMIT_EXITS else ""))
    if notes:
        output += ("" if not output or output.endswith("\n") else "\n") + f"[{'; '.join(notes)}]"
    return output or "[no output]"


async def run_bash(sandbox: SandboxAPI, args: BashArgs) -> ToolResult:
    r = await sandbox.bash(args.command)
    content = _content(r.output, r.exit_code, r.timed_out, r.shell_restarted, sandbox.spec.command_timeout_s)
    return ToolResult(content=content, metadata=r.model_dump(exclude={"output"}))


async def run_python(sandbox: SandboxAPI, args: PythonArgs) -> ToolResult:
    r = await sandbox.python(args.code)
    content = _content(r.output, None, r.timed_out, r.kernel_restarted, sandbox.spec.python_timeout_s)
    return ToolResult(content=content, metadata=r.model_dump(exclude={"output"}))


BASH = Tool(
    name="bash",
    description=(
        "Run a command in a persistent bash shell (working directory, variables and functions persist "
        "between calls). stdout and stderr are returned together; long output is truncated in the middle."
    ),
    args=BashArgs,
    run=run_bash,
    summary="`bash` runs shell commands in a persistent session",
)
PYTHON = Tool(
    name="python",
    description=(
        "Run Python code in a persistent IPython session (variables persist between calls). Printed output "
        "and the value of the last expression are returned; errors come back as a traceback."
    ),
    args=PythonArgs,
    run=run_python,
    summary="`python` runs code in a persistent IPython session",
)
