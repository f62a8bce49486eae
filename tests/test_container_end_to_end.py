# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Math end to end with its sandboxes in containers: real ng_run + ng_collect_rollouts, the scripted
policy, the container backend chosen by a Hydra override alone (a real engine: Podman's service
here; skipped, with the reason, where none can be run: tests/sandbox/container_engine.py)."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from prorl_gym.environments import discover
from prorl_gym.jsonl import read_jsonl
from prorl_gym.sandbox.backends.container.backend import SANDBOX_LABEL
from prorl_gym.sandbox.backends.container.engine import Engine, json_lines
from prorl_gym.stack import Stack, collected_records
from tests.sandbox.container_engine import engine_or_skip

MATH = next(env for env in discover() if env.name == "math")


async def created_containers(socket_path: str, since: float) -> int:
    """How many sandbox containers (by their label) the engine created since then (its event log)."""
    engine = Engine(socket_path)
    try:
        filters = json.dumps({"type": ["container"], "event": ["create"]})
        params = {"since": str(int(since)), "until": str(int(time.time()) + 1), "filters": filters}
        async with engine._client().get("http://engine/v1.41/events", params=params) as response:
            events = json_lines(await response.text())
        return sum(1 for event in events if SANDBOX_LABEL in event.get("Actor", {}).get("Attributes", {}))
    finally:
        await engine.close()


async def sandbox_containers(socket_path: str) -> list[dict]:
    engine = Engine(socket_path)
    try:
        listed = await engine.call("GET", "/containers/json", params={"all": "true"})
        return [c for c in listed if SANDBOX_LABEL in (c.get("Labels") or {})]
    finally:
        await engine.close()


def test_math_rollouts_run_in_containers_chosen_by_a_hydra_override(tmp_path):
    socket_path, _image = engine_or_skip()
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-e2e-ct-", dir="/tmp"))
    sandbox_root.chmod(0o711)
    overrides = [
        f"+{MATH.server_key}.sandbox.root_dir={sandbox_root}",
        f"++{MATH.server_key}.sandbox.backend={{kind:container,socket:'{socket_path}'}}",
    ]
    began = time.time()
    with Stack(
        MATH.config_paths(), overrides=overrides, policy_data=[str(MATH.example)], log_dir=tmp_path / "logs"
    ) as stack:
        rows = []
        for mode in ("gold", "wrong"):
            for row in read_jsonl(MATH.example):
                row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
                rows.append(row)
        inputs, output = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
        inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        stack.collect(MATH.agent, inputs, output)
        records = collected_records(output)
    by_mode: dict[str, list[float]] = {}
    for record in records:
        by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record["reward"])
    assert by_mode == {"gold": [1.0] * (len(rows) // 2), "wrong": [0.0] * (len(rows) // 2)}, by_mode
    assert asyncio.run(created_containers(socket_path, began)) >= 1  # the tools ran in containers
    assert not asyncio.run(sandbox_containers(socket_path)), "containers left after the stack stopped"
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
