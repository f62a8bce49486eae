# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The sandbox's rlimits as command-line prefixes: prlimit for programs, ulimit for shells.

CPU time gets a hard limit a few seconds above the soft one: at the soft limit the process
receives SIGXCPU (exit 152, a clear "CPU time limit"), and only one that ignores it is
SIGKILLed at the hard limit. Equal limits would SIGKILL at once. ResourceLimits are per process
and cumulative over its life (a persistent shell or kernel accumulates CPU across calls).
"""

from __future__ import annotations

from prorl_gym.sandbox.spec import ResourceLimits

CPU_HARD_GRACE_S = 5


def rlimits(limits: ResourceLimits) -> dict[str, int | list[int]]:
    """prlimit's names -> value, or [soft, hard] where they differ."""
    values: dict[str, int | list[int]] = {
        name: value
        for name, value in (
            ("as", limits.memory_bytes),
            ("nproc", limits.processes),
            ("fsize", limits.file_size_bytes),
            ("nofile", limits.open_files),
        )
        if value is not None
    }
    if limits.cpu_time_s is not None:
        values["cpu"] = [limits.cpu_time_s, limits.cpu_time_s + CPU_HARD_GRACE_S]
    return values


def prlimit_prefix(limits: ResourceLimits) -> list[str]:
    flags = [f"--{name}={':'.join(map(str, v)) if isinstance(v, list) else v}" for name, v in rlimits(limits).items()]
    return ["prlimit", *flags, "--"] if flags else []


def ulimit_command(limits: ResourceLimits) -> str:
    """The same limits as a bash builtin; hard limits too, so the agent cannot raise them."""
    values = {
        "v": limits.memory_bytes and limits.memory_bytes // 1024,
        "u": limits.processes,
        "f": limits.file_size_bytes and limits.file_size_bytes // 1024,
        "n": limits.open_files,
    }
    commands = []
    flags = " ".join(f"-{flag} {value}" for flag, value in values.items() if value is not None)
    if flags:
        commands.append(f"ulimit -HS {flags}")
    if limits.cpu_time_s is not None:  # soft first: the hard limit may not drop below the soft one
        commands.append(f"ulimit -S -t {limits.cpu_time_s} && ulimit -H -t {limits.cpu_time_s + CPU_HARD_GRACE_S}")
    return " && ".join(commands)
