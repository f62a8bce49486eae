# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What per-rollout traces cost the agent: CPU per rollout with tracing off and on.

The agent's own rollout path in this process (RolloutPipeline, AgentLoop, stage pools), its peers
answered in-process from canned bytes (no HTTP, no sandbox: what is left is the agent's own work),
three turns (two tool calls, an answer) per rollout; run sequentially, CPU read with process_time.
off: no `tracing:` config, the default (the path holds one `is None` check; nothing is wrapped).
on: spans kept in memory for the dashboard (keep_recent), no exporter: the SDK's own cost; an OTLP
exporter adds its batched export on its own thread. Also the dashboard's per-rollout hooks (its
counters), which run whether or not anyone watches.

    python -m benchmarks.tracing [--rollouts 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from http.cookies import SimpleCookie

from benchmarks.common import emit
from prorl_gym.testing import build_server, transcript
from prorl_gym.tracing import Tracing, TracingConfig
from responses_api_agents.prorl_agent.app import ProRLAgent

ROW = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]}, "expected_answer": "1"}
TOOLS = [{"type": "function", "name": "bash", "description": "", "parameters": {"type": "object"}, "strict": True}]
USAGE = {
    "input_tokens": 10,
    "output_tokens": 7,
    "total_tokens": 17,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


class Canned:
    def __init__(self, status: int, body: bytes, cookies: dict | None = None):
        self.status, self._body, self.cookies = status, body, SimpleCookie(cookies or {})

    async def read(self) -> bytes:
        return self._body


def policy_answer(calls: list[tuple[str, str]], text: str | None) -> bytes:
    response = transcript(text, calls)
    response["output"] = [o for o in response["output"] if o["type"] != "function_call_output"]
    return json.dumps(response | {"usage": USAGE}).encode()


class Peers:
    """The resources and model servers, answering at once from canned bytes."""

    turns = [policy_answer([("bash", '{"command": "ls"}')], None)] * 2 + [policy_answer([], "\\boxed{1}")]

    def __init__(self):
        self.answers = {
            "/seed_session": Canned(200, b'{"sandbox_id": "s1", "host": "h"}', {"env_session": "e1"}),
            "/tools": Canned(200, json.dumps({"tools": TOOLS, "ends_rollout": []}).encode()),
            "/bash": Canned(200, b'{"content": "a b c", "metadata": {}}'),
            "/release": Canned(200, b'{"released": true}'),
        }

    async def post(self, server_name: str, url_path: str, json=None, cookies=None, **_):
        if url_path == "/v1/responses":
            done = sum(1 for item in json["input"] if item.get("type") == "function_call_output")
            return Canned(200, self.turns[min(done, 2)])
        if url_path == "/verify":
            return Canned(200, b'{"reward": 1.0, "failure": null, "response": {"output": []}}')
        return self.answers[url_path]

    async def get(self, server_name: str, url_path: str, **kwargs):
        return await self.post(server_name, url_path, **kwargs)


def agent(traced: bool) -> ProRLAgent:
    peers = Peers()
    built = build_server(
        ProRLAgent,
        "agent",
        resources_server={"type": "resources_servers", "name": "env"},
        model_server={"type": "responses_api_models", "name": "model"},
        journal={"persist": False},
    )
    built._pipeline.peers.client = peers
    if traced:
        built.start_tracing(Tracing(TracingConfig(keep_recent=64)))
    return built


async def cpu_per_rollout(traced: bool, rollouts: int) -> float:
    a = agent(traced)
    for _ in range(50):  # warm: the tool list, imports, caches
        await a.rollout(ROW)
    started = time.process_time()
    for _ in range(rollouts):
        record = await a.rollout(ROW)
    assert record.failure is None and record.num_turns == 3, record.failure
    return (time.process_time() - started) / rollouts


def hooks_us(n: int = 20000) -> float:
    """The dashboard's per-rollout counters (one attempt, one rollout), microseconds."""
    a = agent(False)
    record = asyncio.run(a.rollout(ROW))
    started = time.process_time()
    for _ in range(n):
        a._dashboard.counters.attempt(record)
        a._dashboard.counters.rollout(record)
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=2000)
    args = parser.parse_args()
    results = {}
    for _ in range(2):  # interleaved: a drift of the machine's speed shows as disagreement
        for mode in ("off", "on"):
            us = asyncio.run(cpu_per_rollout(mode == "on", args.rollouts)) * 1e6
            results.setdefault(mode, []).append(round(us, 1))
    off, on = min(results["off"]), min(results["on"])
    emit(
        "tracing",
        {
            "rollouts_each": args.rollouts,
            "turns_per_rollout": 3,
            "cpu_us_per_rollout_off": off,
            "cpu_us_per_rollout_on": on,
            "added_us_on": round(on - off, 1),
            "runs_off": results["off"],
            "runs_on": results["on"],
            "dashboard_hooks_us": round(hooks_us(), 2),
        },
    )


if __name__ == "__main__":
    main()
