# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the capture endpoint adds to a harness's policy call, against calling the model server directly.

    python -m benchmarks.capture_overhead [--conversations 200]

The scripted policy answers as vLLM serving Qwen3 would (its real tokenizer and template), the model
server is in token-in/token-out mode; each conversation is two calls (a tool call, then the answer
after the tool's result), once straight to the model server's /v1/chat/completions (the client puts
the previous reply's ids back itself, as a tito-aware client would) and once through a capture
endpoint (the client sends its history without ids, as any harness does: the capture matches it and
puts them back, and records the call). Direct and captured conversations alternate, so a change in
the machine's speed falls on both. Reported: p50 and p90 of each call's wall time both ways and the
difference (`added_p50_ms`, target <= 1 ms), and whether every captured branch (capture/export.py) is contiguous.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from fastapi import FastAPI

from benchmarks.common import emit, ms, percentile
from prorl_gym.capture import CaptureGateway, export
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import free_port, run_cli, stop_session
from prorl_gym.testing import PYTHON_TOOL, DirectPeer, build_server, served_app
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.wire.items import TRAINING_FIELDS, chat_message_fields
from responses_api_models.balanced_vllm_model.app import BalancedVLLMModel

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
TOOLS = [PYTHON_TOOL]
TARGETS = {"added_p50_ms": 1.0}


async def conversation(http: aiohttp.ClientSession, url: str, row: dict, tito_aware: bool) -> list[float]:
    """Two calls of one conversation at `url` (its /chat/completions): their wall times."""
    messages, cookies, times = [dict(m) for m in row["responses_create_params"]["input"]], {}, []
    for _ in range(2):
        started = time.perf_counter()
        async with http.post(
            f"{url}/chat/completions", json={"messages": messages, "tools": TOOLS}, cookies=cookies
        ) as r:
            answer = await r.json()
            cookies |= {k: m.value for k, m in r.cookies.items()}
        times.append(time.perf_counter() - started)
        assert r.status == 200, answer
        reply = answer["choices"][0]["message"]
        # a token-aware client sends its reply back with its ids, in the fields NeMo Gym takes (0.7 refuses others)
        ids = {k: reply[k] for k in TRAINING_FIELDS if reply.get(k) is not None}
        messages.append(
            chat_message_fields(reply) | ids
            if tito_aware
            else {k: v for k, v in reply.items() if k not in TRAINING_FIELDS}
        )
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in reply.get("tool_calls") or []]
    return times


async def measure(conversations: int, log_dir: Path) -> dict:
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    policy_port = free_port()
    argv = [sys.executable, "-m", "responses_api_models.scripted_policy", "--data", str(EXAMPLE)]
    with open(log_dir / "scripted_policy.log", "w") as log:
        policy = subprocess.Popen(
            [*argv, "--port", str(policy_port), "--tokenizer", "qwen3"],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
            for _ in range(600):
                try:
                    async with http.get(f"http://127.0.0.1:{policy_port}/health") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
            model = build_server(
                BalancedVLLMModel,
                "policy_model",
                base_url=[f"http://127.0.0.1:{policy_port}/v1"],
                api_key="x",
                model="scripted-gold",
                return_token_id_information=True,
                uses_reasoning_parser=True,
                token_mode="tito",
                tokenizer="qwen3",
            )
            model_app = model.setup_webserver()
            model.setup_exception_middleware(model_app)
            async with served_app(model_app, lifespan="on") as model_url:
                gateway = CaptureGateway(DirectPeer(model_url, http), "policy_model")
                app = FastAPI()
                app.include_router(gateway.router())
                async with served_app(app, lifespan="on") as gateway_url:
                    direct, captured, contiguous = [], [], []
                    for i in range(conversations + 10):  # the first 10 of each warm up
                        row = rows[i % len(rows)]
                        d = await conversation(http, f"{model_url}/v1", row, tito_aware=True)
                        key = gateway.open()
                        c = await conversation(http, f"{gateway_url}/capture/{key}/v1", row, tito_aware=False)
                        record = gateway.end(key)
                        if i >= 10:
                            direct += d
                            captured += c
                            contiguous += [token_ids_contiguous(b.output) for b in export(record.tree).branches]
    finally:
        stop_session(policy, grace_s=5)
    p50 = lambda xs: percentile(xs, 50)  # noqa: E731
    p90 = lambda xs: percentile(xs, 90)  # noqa: E731
    return {
        "calls_each_way": len(direct),
        "direct_p50_ms": ms(p50(direct)),
        "captured_p50_ms": ms(p50(captured)),
        "direct_p90_ms": ms(p90(direct)),
        "captured_p90_ms": ms(p90(captured)),
        "added_p50_ms": ms(p50(captured) - p50(direct)),
        "contiguous_fraction": sum(c is True for c in contiguous) / len(contiguous),
        "branches_per_conversation": len(contiguous) / conversations,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prorl-capture-bench-") as log_dir:
        results = asyncio.run(measure(args.conversations, Path(log_dir)))
    results |= {
        "targets": TARGETS,
        "meets_targets": {"added_p50_ms": results["added_p50_ms"] <= TARGETS["added_p50_ms"]},
    }
    emit("capture_overhead", results)


if __name__ == "__main__":
    run_cli(main)
