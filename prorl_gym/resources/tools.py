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


def _status_line(exit_code: int | None, timed_out: bool, restarted: bool, timeout: float) -> str:
    notes = []
    if timed_out:
        notes.append(f"timed out after {timeout:g}s and was interrupted")
    if restarted:
        notes.append("the environment was restarted; earlier state is gone")
    if exit_code not in (0, None) and not timed_out:
        notes.append(f"exit code {exit_code}")
    return f"[{'; '.join(notes)}]" if notes else ""


async def run_bash(sandbox: Sandbox, args: BashArgs) -> ToolResult:
    result = await sandbox.bash(args.command)
    status = _status_line(result.exit_code, result.timed_out, result.shell_restarted, sandbox.spec.command_timeout_s)
    content = result.output + (("\n" if result.output and not result.output.endswith("\n") else "") + status if status else "")
    return ToolResult(content=content or "[no output]", metadata=result.model_dump(exclude={"output"}))


async def run_python(sandbox: Sandbox, args: PythonArgs) -> ToolResult:
    result = await sandbox.python(args.code)
    status = _status_line(None, result.timed_out, result.kernel_restarted, sandbox.spec.python_timeout_s)
    content = result.output + (("\n" if result.output and not result.output.endswith("\n") else "") + status if status else "")
    return ToolResult(content=content or "[no output]", metadata=result.model_dump(exclude={"output"}))


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
