"""Tools the policy can call, as OpenAI function tools, and how each runs in a sandbox.

Each tool is a request model (the function's arguments, validated), a schema derived
from it, and a handler returning ToolResult: `content` is what the policy reads,
`metadata` is structured detail for analysis (exit code, timeout, truncation, duration).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.sandbox import Sandbox


class ToolResult(BaseModel):
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BashArgs(ToolArgs):
    command: str = Field(description="The bash command to run.")


class PythonArgs(ToolArgs):
    code: str = Field(description="Python code to run.")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[ToolArgs]
    run: Callable[[Sandbox, Any], Awaitable[ToolResult]]

    def schema(self) -> dict:
        """Responses-API function tool (NeMo Gym rows carry this shape)."""
        params = self.args.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "name": self.name, "description": self.description, "parameters": params, "strict": True}


# bash reports death by signal as 128 + signal; these are the sandbox's limits at work.
LIMIT_EXITS = {137: "killed (SIGKILL)", 152: "killed: CPU time limit", 153: "killed: file size limit"}


def _content(output: str, exit_code: int | None, timed_out: bool, restarted: bool, timeout: float) -> str:
    """What the policy reads: the output, then one bracketed line for anything unusual."""
    notes = []
    if timed_out:
        notes.append(f"timed out after {timeout:g}s and was interrupted")
    if restarted:
        notes.append("the environment was restarted; earlier state is gone")
    if exit_code not in (0, None) and not timed_out:
        notes.append(f"exit code {exit_code}" + (f", {LIMIT_EXITS[exit_code]}" if exit_code in LIMIT_EXITS else ""))
    if notes:
        output += ("" if not output or output.endswith("\n") else "\n") + f"[{'; '.join(notes)}]"
    return output or "[no output]"


async def run_bash(sandbox: Sandbox, args: BashArgs) -> ToolResult:
    r = await sandbox.bash(args.command)
    content = _content(r.output, r.exit_code, r.timed_out, r.shell_restarted, sandbox.spec.command_timeout_s)
    return ToolResult(content=content, metadata=r.model_dump(exclude={"output"}))


async def run_python(sandbox: Sandbox, args: PythonArgs) -> ToolResult:
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
)
PYTHON = Tool(
    name="python",
    description=(
        "Run Python code in a persistent IPython session (variables persist between calls). Printed output "
        "and the value of the last expression are returned; errors come back as a traceback."
    ),
    args=PythonArgs,
    run=run_python,
)

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (BASH, PYTHON)}
