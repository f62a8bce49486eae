# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`python -m prorl_gym.evaluation` (`make eval`): the command line is cli.py.

A real policy endpoint is checked here first (prorl_gym/preflight.py), before the command's own
imports (NeMo Gym, the environments, plotting: seconds of CPU) and before anything starts, so a
wrong URL, model name or token-id setting fails in about a second, saying what was tried and what
to change (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from prorl_gym.preflight import PolicyCheck, PolicyCheckError, check_policy
from prorl_gym.stack import run_cli


def check_policy_first(argv: list[str] | None) -> int | None:
    """2 if the endpoint named on the command line cannot serve the run (said on stderr); None to go on."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--policy-base-url")
    parser.add_argument("--policy-model")
    parser.add_argument("--no-token-ids", action="store_true")
    parser.add_argument("--no-policy-check", action="store_true")
    parser.add_argument("--from-records", nargs="+")
    args, _ = parser.parse_known_args(argv)
    if not (args.policy_base_url and args.policy_model) or args.no_policy_check or args.from_records:
        return None  # nothing to check, or the full command line's errors say what is missing
    urls = [url.strip() for url in args.policy_base_url.split(",") if url.strip()]
    try:
        said = asyncio.run(check_policy(PolicyCheck(urls, args.policy_model, token_ids=not args.no_token_ids)))
    except PolicyCheckError as exc:
        print(f"error: {exc}\nnothing was started", file=sys.stderr)
        return 2
    for line in said:
        print(f"[eval] policy check: {line}", file=sys.stderr, flush=True)
    return None


def main(argv: list[str] | None = None) -> int:
    if (code := check_policy_first(argv)) is not None:
        return code
    from prorl_gym.evaluation.cli import main as evaluate  # after the check: its imports take seconds

    return evaluate(argv)


if __name__ == "__main__":
    run_cli(main)
