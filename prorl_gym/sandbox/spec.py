"""What a sandbox should be: the one config object every backend reads."""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel, Field


def default_root_dir() -> str:
    # Short on purpose: Unix socket paths (the kernel's) must stay under 108 bytes.
    return os.environ.get("PRORL_SANDBOX_ROOT") or f"/tmp/prorl-{os.getuid()}"


class SandboxSpec(BaseModel):
    backend: str = "local"
    root_dir: str = Field(default_factory=default_root_dir, description="Host directory for per-sandbox dirs.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment inside the sandbox.")
    output_limit_bytes: int = 16 * 1024
    command_timeout_s: float = 30.0
    python_timeout_s: float = 30.0
    interrupt_grace_s: float = 1.0
    start_timeout_s: float = 30.0
    kernel_python: str = Field(default=sys.executable, description="Interpreter inside the sandbox with ipykernel.")
