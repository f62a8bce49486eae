# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Debug a sandbox from the command line.

    python -m prorl_gym.sandbox exec [--backend NAME] [--timeout S] -- <bash command>

Creates a sandbox, runs the command in its shell, prints the output and exits with the
command's exit code (124 on timeout, like coreutils' timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from prorl_gym.sandbox import Backends, SandboxError, SandboxSpec, UnknownBackendError, create_sandbox, get_backend


async def _exec(backend: str, command: str, timeout: float) -> int:
    backends = Backends()  # this command's own, closed before its event loop ends (an engine's client)
    try:
        async with await create_sandbox(SandboxSpec(backend=backend), backends=backends) as sandbox:
            result = await sandbox.bash(command, timeout=timeout)
    finally:
        await backends.close()
    sys.stdout.write(result.output)
    sys.stdout.flush()
    if result.timed_out:
        print(f"[timed out after {timeout}s]", file=sys.stderr)
        return 124
    return 1 if result.exit_code is None else result.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prorl_gym.sandbox")
    commands = parser.add_subparsers(dest="action", required=True)
    run = commands.add_parser("exec", help="run one bash command in a fresh sandbox")
    run.add_argument("--backend", default="local")
    run.add_argument("--timeout", type=float, default=60.0)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- <bash command>")
    args = parser.parse_args(argv)
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not words:
        parser.error("give a command after --")
    try:
        get_backend(args.backend)  # an unknown name is told as such, before any spec is built
        return asyncio.run(_exec(args.backend, " ".join(words), args.timeout))
    except (SandboxError, UnknownBackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
