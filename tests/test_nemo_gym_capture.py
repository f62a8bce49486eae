# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym 0.7's observability and training-token capture see our rollouts, on a real stack (math under ng_run,
the scripted policy answering as vLLM serving Qwen3 would, the model server in token-in/token-out mode): with
`observability_enabled` and `token_id_capture` on for every agent, the agent's model calls go under each
rollout's prefix (PeerClient, as NeMo Gym's ServerClient sends them), so NeMo Gym's model-call capture folds
each rollout's calls into its record and its token capture records one entry per call through its own
interfaces (the model server's /v1/responses and the tito path), as a trainer reading its store finds them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from nemo_gym.token_id_capture.records import ParentResolutionStatus
from nemo_gym.token_id_capture.store import TokenCaptureStore

from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, collected_records
from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3

MATH = environment("math")
MODEL = "+policy_model.responses_api_models.balanced_vllm_model"
try:
    qwen3()
except TokenizerNotFound as exc:  # make setup installs it; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("capture")
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-capture-", dir="/tmp"))
    sandbox_root.chmod(0o711)
    capture = [  # the run's own settings: ng_run's servers and the collector read them alike
        "+observability_enabled=true",
        f"+model_call_capture_dir={tmp / 'calls'}",
        "+token_id_capture.enabled=true",
        "+token_id_capture.all_agents=true",
        f"+token_id_capture.dir={tmp / 'tokens'}",
        # a trainer reads the records through its own TokenSource (NeMo RL): the collector leaves them in the
        # store (with it on, records that carry their ids, as ours do, are left as they are and the capture retired)
        "+token_id_capture.rebuild_response=false",
    ]
    overrides = [f"+{MATH.server_key}.sandbox.root_dir={sandbox_root}", f"{MODEL}.token_mode=tito"]
    with Stack(
        MATH.config_paths(),
        overrides=[*overrides, f"{MODEL}.tokenizer=qwen3", *capture],
        policy_data=[str(MATH.example)],
        policy_args=["--tokenizer", "qwen3"],
        log_dir=tmp / "logs",
    ) as stack:
        stack.tmp, stack.capture = tmp, capture
        yield stack
    shutil.rmtree(sandbox_root, ignore_errors=True)


@pytest.fixture(scope="module")
def records(stack) -> list[dict]:
    output = stack.tmp / "rollouts.jsonl"
    stack.collect(MATH.agent, MATH.example, output, extra=stack.capture)
    return collected_records(output)


def test_every_rollout_scored_as_without_capture(records):
    assert [r["reward"] for r in records] == [1.0] * len(read_jsonl(MATH.example))
    assert not [r["failure"] for r in records if r["failure"]]


def test_each_records_model_calls_are_its_own(records):
    """NeMo Gym's model-call capture, keyed by each rollout's id: the agent's calls under its prefix."""
    for record in records:
        capture = record["ng_model_call_capture"]
        rollout_id = f"{record['_ng_task_index']}-{record['_ng_rollout_index']}"
        assert capture["rollout_id"] == rollout_id and not capture.get("gaps"), capture
        assert len(capture["calls"]) == record["num_turns"] > 0


def test_token_capture_recorded_each_call_through_nemo_gyms_interfaces(stack, records):
    store = TokenCaptureStore(stack.tmp / "tokens")
    for record in records:
        rollout_id = f"{record['_ng_task_index']}-{record['_ng_rollout_index']}"
        entries = sorted(store.read_entries(rollout_id), key=lambda e: e.created_at)
        assert len(entries) == record["num_turns"], rollout_id
        assert [e.parent_resolution for e in entries] == [
            ParentResolutionStatus.ROOT,
            *[ParentResolutionStatus.RESOLVED] * (len(entries) - 1),
        ]
        output = record["response"]["output"]
        generated = [[int(t) for t in o["generation_token_ids"]] for o in output if "generation_token_ids" in o]
        assert [e.generation_token_ids for e in entries] == generated  # the record's own ids, call by call
