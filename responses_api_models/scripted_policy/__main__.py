# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Serve the scripted policy (a stand-in for a GPU model) on an OpenAI-compatible endpoint.

    python -m responses_api_models.scripted_policy --data rows.jsonl [--data ...] [--port 8000]
        [--mode gold|wrong|malformed] [--tool-calls N] [--latency-ms MS] [--tokenizer qwen3|FAMILY|DIR]

Point NeMo Gym at it with policy_base_url=http://127.0.0.1:<port>/v1.
"""

from __future__ import annotations

import argparse

import uvicorn

from prorl_gym.scripted import MODES
from prorl_gym.tokens.tokenizer import load
from responses_api_models.scripted_policy.app import create_app
from responses_api_models.scripted_policy.real_tokens import RealTokens
from responses_api_models.scripted_policy.replay import ScriptedPolicy


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m responses_api_models.scripted_policy")
    parser.add_argument("--data", action="append", required=True, help="dataset jsonl whose tasks it can play")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--mode", default="gold", choices=MODES)
    parser.add_argument("--tool-calls", type=int, default=1, help="tool calls before the answer (gold/wrong)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated generation latency")
    parser.add_argument(
        "--tool-alias",
        action="append",
        default=[],
        metavar="RECORDED=NAME",
        help="call a recorded tool by another name",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="answer as vLLM serving a real model would: its tokenizer and chat template (qwen3, a family of "
        "prorl_gym/tokens/families.py, or a directory with tokenizer.json and tokenizer_config.json); also serves "
        "token-id /v1/completions and /generate",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="answer as an OpenAI-compatible server that is not vLLM (no log-probs, token ids, /models, /tokenize)",
    )
    args = parser.parse_args()
    policy = ScriptedPolicy.from_files(
        args.data,
        default_mode=args.mode,
        tool_calls=args.tool_calls,
        latency_s=args.latency_ms / 1000,
        tool_aliases=dict(alias.split("=", 1) for alias in args.tool_alias),
    )
    tokens = RealTokens(load(args.tokenizer)) if args.tokenizer else None
    print(f"scripted policy (stand-in for a GPU model) on http://{args.host}:{args.port}/v1", flush=True)
    # h11, whatever else is installed: the stand-in's own CPU per rollout is the benchmarks' machine-speed
    # yardstick, so its work must stay the same from release to release (the servers use httptools).
    app = create_app(policy, tokens, args.plain)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", http="h11")


if __name__ == "__main__":
    main()
