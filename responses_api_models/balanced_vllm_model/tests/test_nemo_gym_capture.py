# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The model server cooperates with NeMo Gym 0.7's token capture and vllm_model's options (real servers: the
scripted policy answering as vLLM serving Qwen3 would, the model server on uvicorn, NeMo Gym's own file store):

- a rollout's calls under 0.7's training-capture prefix are recorded through its capture interfaces, in chat
  mode and in token-in/token-out mode alike, into its file store or through the agent's capture endpoint as an
  external transport: one entry per call, the second's parent resolved to the first, the entry's ids the
  answer's;
- NEMO_GYM_VLLM_TRANSPORT_LOG logs every engine call in both modes (vllm_model's _post_init runs);
- endpoint_file: the pool follows the URL a serving job publishes."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI
from nemo_gym.token_id_capture.records import ParentResolutionStatus
from nemo_gym.token_id_capture.store import TokenCaptureStore

from prorl_gym.capture.nemo_gym_transport import CaptureTokenSource
from prorl_gym.capture.token_ledger import TokenLedger
from prorl_gym.testing import served_app
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3
from responses_api_models.balanced_vllm_model.tests.harness import ROWS, Policies, Rollout, serve_model

try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

MODES = {"chat": {}, "tito": {"token_mode": "tito", "tokenizer": "qwen3"}}


@pytest.fixture
def policies(tmp_path):
    started = Policies(tmp_path)
    yield started
    started.stop_all()


@asynccontextmanager
async def token_store(kind: str, tmp_path: Path):
    """(the run's token_id_capture block, a TokenSource over where it records): NeMo Gym's own file store, or
    the agent's capture endpoint as an external transport (prorl_gym/capture/nemo_gym_transport.py)."""
    if kind == "file":
        yield {"enabled": True, "dir": str(tmp_path / "tokens")}, TokenCaptureStore(tmp_path / "tokens")
        return
    app = FastAPI()
    app.include_router(TokenLedger().router())
    async with served_app(app) as url:
        module = "prorl_gym.capture.nemo_gym_transport"
        block = {
            "enabled": True,
            "sink": f"{module}:CaptureTokenSink",
            "sink_kwargs": {"url": url},
            "lineage_store": f"{module}:CaptureLineageResolver",
            "lineage_store_kwargs": {"url": url},
        }
        source = CaptureTokenSource(url)
        try:
            yield block, source
        finally:
            await source.close()


@pytest.mark.parametrize("store", ["file", "capture_endpoint"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_rollouts_calls_are_recorded_through_nemo_gyms_token_capture(policies, tmp_path, mode, store):
    (policy,) = await policies.start(1, args=("--tokenizer", "qwen3"))
    async with token_store(store, tmp_path) as (block, source):
        capture = {"token_id_capture": block}
        async with serve_model([policy.url], capture, uses_reasoning_parser=True, **MODES[mode]) as server:
            rollout = Rollout(server, prefix="/ng-rollout/task-7/training-token-capture")
            turns = [await rollout.turn(), await rollout.turn()]
            plain = Rollout(server, row=ROWS[1])  # no prefix: no rollout to attribute it to, nothing recorded
            assert (await plain.turn()).status == 200
        assert [t.status for t in turns] == [200, 200], turns
        snapshot = await source.freeze("task-7")
    assert not snapshot.incomplete and len(snapshot.entries) == 2
    first, second = sorted(snapshot.entries, key=lambda e: e.created_at)
    assert first.parent_resolution == ParentResolutionStatus.ROOT
    assert second.parent_resolution == ParentResolutionStatus.RESOLVED and second.parent_call_id == first.model_call_id
    for entry, turn in zip((first, second), turns):  # the answer's own ids, as the policy gave them
        (item,) = [o for o in turn.body["output"] if "generation_token_ids" in o]
        assert entry.generation_token_ids == [int(t) for t in item["generation_token_ids"]]
        assert entry.prompt_token_ids == [int(t) for t in item["prompt_token_ids"]]
    if store == "file":
        assert [p.name for p in (tmp_path / "tokens").iterdir() if "task-7" not in p.name] == []  # unprefixed: none


@pytest.mark.parametrize("mode", MODES)
async def test_the_transport_log_has_every_engine_call(policies, tmp_path, monkeypatch, mode):
    (policy,) = await policies.start(1, args=("--tokenizer", "qwen3"))
    log = tmp_path / "transport.jsonl"
    monkeypatch.setenv("NEMO_GYM_VLLM_TRANSPORT_LOG", str(log))
    async with serve_model([policy.url], uses_reasoning_parser=True, **MODES[mode]) as server:
        rollout = Rollout(server)
        assert [(await rollout.turn()).status for _ in range(2)] == [200, 200]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["transport_request", "transport_response"] * 2
    if mode == "tito":  # its own calls (the completion route, a token-id prompt), logged by the model server's client
        assert all(e["url"] == f"{policy.url}/completions" for e in events)
        assert all(isinstance(e["request_payload"]["prompt"], list) for e in events if "request_payload" in e)
    else:  # vllm_model's chat route, logged by vllm_model itself
        assert all(e.get("configured_base_urls") == [policy.url] for e in events if e["event"] == "transport_request")
    responses = [e["raw_response"] for e in events if e["event"] == "transport_response"]
    assert all(r["choices"] for r in responses)


async def test_the_pool_follows_the_endpoint_file(policies, tmp_path):
    first, second = await policies.start(2)
    published = tmp_path / "endpoint"
    published.write_text(first.url)
    settings = dict(endpoint_file=str(published), endpoint_check_interval_s=0.1)
    async with serve_model([first.url], uses_reasoning_parser=False, **settings) as server:
        assert list(await server.endpoints()) == [first.url]
        published.write_text(second.url + "\n")  # the serving job moved
        await server.wait_for(lambda endpoints: list(endpoints) == [second.url])
        published.unlink()  # rotating: nothing changes
        await asyncio.sleep(0.3)
        assert list(await server.endpoints()) == [second.url]
        assert (await Rollout(server).turn()).endpoint == second.url
