# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Math end to end with its sandboxes in containers: real ng_run + ng_collect_rollouts, the scripted
policy (100 ms a turn), the container backend chosen by a Hydra override alone, a real engine
(Podman's service here; skipped, with the reason, where none can be run:
tests/support/container_engine.py). The resources server is SIGKILLed mid-collection: its
restarted successor removes the dead one's containers (by their owner label) and every row
still gets its record."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.sandbox.backends.container.backend import OWNER_LABEL, SANDBOX_LABEL
from prorl_gym.sandbox.backends.container.engine import Engine, json_lines
from prorl_gym.stack import Stack, collected_records
from prorl_gym.testing import supervised_server, traversable_dir
from tests.support.container_engine import engine_or_skip

MATH = environment("math")
RESTART_DELAY_S = 2


def engine_call(socket_path: str, call):
    async def run():
        engine = Engine(socket_path)
        try:
            return await call(engine)
        finally:
            await engine.close()

    return asyncio.run(run())


async def created_containers(engine: Engine, since: float) -> int:
    """How many sandbox containers (by their label) the engine created since then (its event log)."""
    filters = json.dumps({"type": ["container"], "event": ["create"]})
    params = {"since": str(int(since)), "until": str(int(time.time()) + 1), "filters": filters}
    async with engine._client().get("http://engine/v1.41/events", params=params) as response:
        events = json_lines(await response.text())
    return sum(1 for event in events if SANDBOX_LABEL in event.get("Actor", {}).get("Attributes", {}))


def sandbox_containers(root: Path):
    """The engine's sandbox containers of sandboxes under `root` (they bind their run dir from there):
    other test runs may have theirs on the same engine."""

    async def listed(engine: Engine) -> list[dict]:
        found = await engine.list({SANDBOX_LABEL: None})
        return [c for c in found if any(m.get("Source", "").startswith(f"{root}/") for m in c.get("Mounts") or [])]

    return listed


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    socket_path, _image = engine_or_skip()
    sandbox_root = traversable_dir("prorl-e2e-ct-")
    overrides = [
        f"+{MATH.server_key}.sandbox.root_dir={sandbox_root}",
        f"++{MATH.server_key}.sandbox.backend={{kind:container,socket:'{socket_path}'}}",
        f"+{MATH.agent_key}.retry.backoff_s=0.5",
    ]
    logs = tmp_path_factory.mktemp("e2e-container") / "logs"
    with Stack(
        MATH.config_paths(),
        overrides=overrides,
        policy_data=[str(MATH.example)],
        policy_args=["--latency-ms", "100"],
        log_dir=logs,
        env={"PRORL_RESTART_DELAY_S": str(RESTART_DELAY_S)},
        ray=ray_cluster,
    ) as stack:
        stack.tmp, stack.sandbox_root, stack.socket_path = logs.parent, sandbox_root, socket_path
        yield stack
    assert not engine_call(socket_path, sandbox_containers(sandbox_root)), "containers left after the stack stopped"
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)


def test_math_rollouts_run_in_containers_chosen_by_a_hydra_override(stack):
    began = time.time()
    rows = []
    for mode in ("gold", "wrong"):
        for row in read_jsonl(MATH.example):
            row["responses_create_params"]["metadata"] = {"scripted_mode": mode}
            rows.append(row)
    inputs, output = stack.tmp / "rows.jsonl", stack.tmp / "out.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stack.collect(MATH.agent, inputs, output)
    by_mode: dict[str, list[float]] = {}
    for record in collected_records(output):
        by_mode.setdefault(record["responses_create_params"]["metadata"]["scripted_mode"], []).append(record["reward"])
    assert by_mode == {"gold": [1.0] * (len(rows) // 2), "wrong": [0.0] * (len(rows) // 2)}, by_mode
    assert engine_call(stack.socket_path, lambda engine: created_containers(engine, began)) >= 1  # tools ran there


def test_a_resources_server_killed_mid_collection_leaves_no_container_after_its_restart(stack):
    output = stack.tmp / "killed_server.jsonl"
    with ThreadPoolExecutor(1) as pool:
        collection = pool.submit(stack.collect, MATH.agent, MATH.example, output, num_repeats=2)
        deadline = time.monotonic() + 60
        while (
            len(running := engine_call(stack.socket_path, sandbox_containers(stack.sandbox_root))) < 2
        ):  # rollouts in flight
            assert time.monotonic() < deadline, "no rollout got busy"
            time.sleep(0.05)
        killed = supervised_server(stack.session, MATH.folder)
        os.kill(killed, signal.SIGKILL)
        collection.result(timeout=300)
    owners = {c["Labels"][OWNER_LABEL] for c in running}
    dead = {owner for owner in owners if owner.split("-")[-2] == str(killed)}
    assert dead, f"the killed server {killed} had no container running: {owners}"
    left = [
        c
        for c in engine_call(stack.socket_path, sandbox_containers(stack.sandbox_root))
        if c["Labels"][OWNER_LABEL] in dead
    ]
    assert not left, f"the killed server's containers survived its restart: {[c['Names'] for c in left]}"
    records = collected_records(output)
    assert len(records) == 10 and all(r["reward"] == 1.0 for r in records), [r["failure"] for r in records]
    assert supervised_server(stack.session, MATH.folder) != killed  # started again, in the same stack
