# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`prorl_local`: our sandboxes behind NeMo Gym's sandbox provider protocol (nemo-gym 0.7).

Published through the `nemo_gym.sandbox_providers` entry point (pyproject.toml), so NeMo Gym's
agents select it by name like a built-in provider. The provider config is our SandboxSpec:

    sandbox:
      prorl_local:              # kwargs of ProrlLocalProvider = fields of prorl_gym.sandbox.SandboxSpec
        isolation: required
        network: false
        root_dir: /tmp/prorl-sandboxes
        command_timeout_s: 180  # used when exec gets timeout_s=None

Per sandbox, NeMo Gym's SandboxSpec maps onto ours: workdir -> workspace, env -> env (added),
ready_timeout_s -> start_timeout_s, ttl_s -> lease_ttl_s, resources.memory_mib ->
limits.memory_bytes, resources.disk_gib -> limits.workspace_bytes; provider_options may set any
of our fields and has the last word. What we cannot honour is refused, not silently dropped: a
container entrypoint, GPUs, and service ports (`ports`: nothing outside can reach a port inside,
as the sandbox has no network namespace shared with the host, so no endpoint could be resolved).
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nemo_gym.sandbox import SandboxCreateError, SandboxExecResult, SandboxHandle, SandboxResources, SandboxStatus
from nemo_gym.sandbox import SandboxSpec as GymSandboxSpec
from pydantic import ValidationError

from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.sandbox.errors import SandboxClosedError, SandboxError
from prorl_gym.sandbox.sandbox import Sandbox, create_sandbox
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)

# NeMo Gym's own providers report "no process exit code" (timeout, runtime failure) as 125 + error_type.
RUNTIME_RETURN_CODE = 125
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MiB, GiB = 1 << 20, 1 << 30


def _check_fields(options: Mapping[str, Any], where: str) -> None:
    # Our SandboxSpec ignores unknown keys; a typo in a YAML config must fail instead (NeMo Gym's
    # providers raise ValueError naming the unknown and the supported options).
    unknown = set(options) - set(SandboxSpec.model_fields)
    if unknown:
        raise ValueError(
            f"Unknown prorl_local {where} option(s): {', '.join(sorted(unknown))}. "
            f"Supported (prorl_gym.sandbox.SandboxSpec fields): {', '.join(sorted(SandboxSpec.model_fields))}"
        )


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides win; nested mappings (env, limits, apptainer) are merged, not replaced."""
    merged = dict(base)
    for key, value in overrides.items():
        old = merged.get(key)
        merged[key] = {**old, **value} if isinstance(value, Mapping) and isinstance(old, dict) else value
    return merged


def _subshell(command: str, cwd: str | None, env: Mapping[str, str] | None) -> str:
    """NeMo Gym's exec is one fresh process per call (`sh -c` in its providers): run the command
    as `bash -c` in a subshell of our persistent bash, so cwd, env, variables and even `exit`
    stay within this call, while no process has to be spawned through the sandbox boundary."""
    parts = [f"cd -- {shlex.quote(cwd)} || exit"] if cwd else []
    for name, value in (env or {}).items():
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"invalid environment variable name: {name!r}")
        parts.append(f"export {name}={shlex.quote(str(value))}")
    parts.append(f"exec bash -c {shlex.quote(command)}")
    return "(" + "; ".join(parts) + ")"


class ProrlLocalProvider:
    """NeMo Gym SandboxProvider: one prorl_gym Sandbox per NeMo Gym sandbox handle."""

    name = "prorl_local"

    def __init__(self, **options: Any) -> None:
        _check_fields(options, "provider")
        try:  # bad values fail at config time, not per sandbox
            self._base = SandboxSpec.model_validate(options)
        except ValidationError as exc:
            raise ValueError(f"invalid prorl_local provider options: {exc}") from None
        self._backends = Backends()  # this provider's backend instances
        self._sandboxes: dict[str, Sandbox] = {}

    def spec_for(self, spec: GymSandboxSpec) -> SandboxSpec:
        """Our SandboxSpec for a NeMo Gym SandboxSpec (spec.files are uploaded by AsyncSandbox.start)."""
        resources = spec.resources
        assert isinstance(resources, SandboxResources)  # GymSandboxSpec.__post_init__ converts mappings
        if spec.entrypoint:
            raise SandboxCreateError("prorl_local does not run container entrypoints (spec.entrypoint)")
        if resources.gpu:
            raise SandboxCreateError("prorl_local sandboxes have no GPUs (spec.resources.gpu)")
        if spec.ports:
            raise SandboxCreateError(
                f"prorl_local cannot expose service ports {list(spec.ports)} (spec.ports): its sandboxes share no "
                "network with the host, so no endpoint outside could reach them; use a provider that serves "
                "ports (docker, daytona, ...) for this task"
            )
        if resources.cpu is not None:
            log.warning("prorl_local: resources.cpu is ignored (no CPU quota; limits.cpu_time_s caps CPU seconds)")
        derived: dict[str, Any] = {"env": dict(spec.env)}
        if spec.image is not None:
            derived["image"] = spec.image
        if spec.workdir:
            derived["workspace"] = spec.workdir
        if spec.ready_timeout_s is not None:
            derived["start_timeout_s"] = spec.ready_timeout_s
        if spec.ttl_s is not None:  # enforced by the lease reaper, so approximately
            derived["lease_ttl_s"] = spec.ttl_s
        limits: dict[str, int] = {}
        if resources.memory_mib is not None:
            limits["memory_bytes"] = resources.memory_mib * MiB  # per-process address space: no cgroups
        if resources.disk_gib is not None:
            limits["workspace_bytes"] = resources.disk_gib * GiB  # size of the workspace tmpfs
        if limits:
            derived["limits"] = limits
        _check_fields(spec.provider_options, "provider_options")
        ours = SandboxSpec.model_validate(_merge(_merge(self._base.model_dump(), derived), spec.provider_options))
        try:
            self._backends.get(ours).check(ours)
        except ValueError as exc:
            raise SandboxCreateError(f"prorl_local: {exc}") from exc
        return ours

    def _open(self, handle: SandboxHandle) -> Sandbox:
        sandbox = self._sandboxes.get(handle.sandbox_id)
        if sandbox is None or sandbox.closed:
            raise SandboxClosedError(f"prorl_local sandbox {handle.sandbox_id!r} is closed or not from this provider")
        return sandbox

    async def create(self, spec: GymSandboxSpec) -> SandboxHandle:
        ours = self.spec_for(spec)
        try:
            sandbox = await create_sandbox(
                ours, backends=self._backends
            )  # placed and ready: its shell starts with the first exec
        except SandboxError as exc:  # SandboxStartError, IsolationUnavailable, ...
            raise SandboxCreateError(f"prorl_local could not create a sandbox: {exc}") from exc
        self._sandboxes[sandbox.id] = sandbox
        # raw lets status() tell "closed by us" (STOPPED) from "never ours" (UNKNOWN).
        return SandboxHandle(sandbox_id=sandbox.id, provider_name=self.name, raw=sandbox)

    async def exec(
        self,
        handle: SandboxHandle,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: int | float | None = None,
        user: str | int | None = None,
    ) -> SandboxExecResult:
        sandbox = self._open(handle)
        # A sandbox has one user, who owns the workspace: the nearest thing to root it has. Agents
        # default to user="root" (mini_swe_agent_2), so that is accepted; other users cannot be.
        if user not in (None, "root", 0):
            raise ValueError(f"prorl_local sandboxes have a single user; cannot run as {user!r}")
        if cwd is not None and cwd == sandbox.spec.workspace:
            cwd = sandbox.workspace  # same path when isolated; a host dir with isolation "none"
        result = await sandbox.bash(_subshell(command, cwd, env), timeout_s)
        # Our pty merges stdout and stderr (as a terminal does): all output is in stdout; stderr is
        # None, or our own note when there is no exit code. Fields: (stdout, stderr, return_code).
        if result.timed_out:
            note = f"command timed out after {timeout_s or sandbox.spec.command_timeout_s:g}s"
            return SandboxExecResult(result.output, note, RUNTIME_RETURN_CODE, error_type="timeout")
        if result.exit_code is None or result.shell_restarted:  # e.g. `kill -9 $PPID`: no exit code of ours
            died = "the sandbox shell was killed and restarted"
            return SandboxExecResult(result.output, died, RUNTIME_RETURN_CODE, error_type="sandbox")
        return SandboxExecResult(stdout=result.output, stderr=None, return_code=result.exit_code)

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        # Written by a shell inside the sandbox (never through host paths); relative = under workspace.
        await self._open(handle).upload(source_path, target_path)

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        sandbox = self._open(handle)
        await asyncio.to_thread(Path(target_path).parent.mkdir, parents=True, exist_ok=True)
        await sandbox.download(source_path, target_path)  # missing file: FileNotFoundError

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        sandbox = self._sandboxes.get(handle.sandbox_id)
        if sandbox is not None and not sandbox.closed:
            return SandboxStatus.RUNNING  # a dead shell is restarted on the next call
        if isinstance(handle.raw, Sandbox) and handle.raw.closed:
            return SandboxStatus.STOPPED
        return SandboxStatus.UNKNOWN

    async def close(self, handle: SandboxHandle) -> None:
        """Kill every process of the sandbox and remove its files. Idempotent."""
        sandbox = self._sandboxes.pop(handle.sandbox_id, None)
        if sandbox is not None:
            await sandbox.close()

    async def aclose(self) -> None:
        # Only provider-scoped resources (we have none). AsyncSandbox.stop() calls this after every
        # close, so closing our other sandboxes here would kill those of a shared provider instance.
        return None
