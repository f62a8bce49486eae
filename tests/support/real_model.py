# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the real-model tests share: a stack whose policy is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) on
llama.cpp, and what a trainer needs of a rollout whatever the model did in it.

Two tiers: tests/test_real_model.py (in `make test`: one math rollout, a call to a tool that does not
exist, a context overflow; a few minutes) and tests/test_real_model_full.py (`make test-real-model`:
every environment, the grammar, the runaway, the async example; tens of minutes).
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from prorl_gym.environments import Environment, all_config_paths, discover
from prorl_gym.errors import ProrlError
from prorl_gym.jsonl import read_jsonl
from prorl_gym.local_models import local_model, verified
from prorl_gym.stack import Stack, collected_records, cpu_rollout_limits

MODEL = "qwen2.5-coder-0.5b"
ENVIRONMENTS = {env.name: env for env in discover()}
PATHS = {"tagged", "constrained", "lenient_fenced", "lenient_bare", "lenient_unbraced", "lenient_malformed"}
STOPS = {"answered", "finish_tool", "max_turns", "max_output_tokens", "context_length"}


def model_or_skip() -> None:
    try:
        verified(local_model(MODEL))
    except ProrlError as exc:  # make setup fetches it; never at test time
        pytest.skip(str(exc), allow_module_level=True)


@contextmanager
def real_model_stack(envs: list[Environment], limits: dict[str, int], tmp: Path) -> Iterator[Stack]:
    """One ng_run with these environments and one llama.cpp server (one slot); no sandbox left behind."""
    sandbox_root = Path(tempfile.mkdtemp(prefix="prorl-real-", dir="/tmp"))  # reachable by the sandbox uid
    sandbox_root.chmod(0o711)
    overrides = [f"+{env.server_key}.sandbox.root_dir={sandbox_root}" for env in envs]
    overrides += [o for env in envs for o in cpu_rollout_limits(env.agent, **limits)]
    with Stack(all_config_paths(envs), overrides=overrides, local_model=MODEL, log_dir=tmp / "logs") as stack:
        stack.tmp = tmp
        stack.llamacpp = f"http://127.0.0.1:{stack.policy_port}"
        yield stack
    assert not [p for p in sandbox_root.iterdir() if not p.name.startswith(".")], "sandbox directories left behind"
    assert not list((sandbox_root / ".leases").glob("*.json")), "leases left behind"
    shutil.rmtree(sandbox_root)


def collect(stack: Stack, env: str, limit: int, repeats: int = 1) -> list[dict]:
    output = stack.tmp / f"{env}.jsonl"
    # one rollout at a time: llama.cpp's one slot keeps its conversation cached, turn after turn
    extra = [f"+limit={limit}", "+num_samples_in_parallel=1"]
    stack.collect(ENVIRONMENTS[env].agent, ENVIRONMENTS[env].example, output, repeats, extra=extra, timeout_s=3000)
    return collected_records(output)


def rows(env: str, n: int = 1, **params) -> list[dict]:
    out = read_jsonl(ENVIRONMENTS[env].example)[:n]
    for row in out:
        row["responses_create_params"] |= params
    return out


def generations(record: dict) -> list[dict]:
    return [o for o in record["response"]["output"] if "generation_token_ids" in o]


def assert_trainable(record: dict) -> None:
    """What a trainer needs of a rollout, whatever the model did in it."""
    failure = record.get("failure")
    assert not (failure and failure["infra"]) and record["attempts"] == 1, failure or record["attempt_failures"]
    assert failure is None, failure  # nothing this model does is a failure: every end is a typed stop
    assert record["stop_reason"] in STOPS and isinstance(record["reward"], float) and 0.0 <= record["reward"] <= 1.0
    assert record["token_ids_contiguous"] is True and record["token_prompts"].get("rendered") == 1
    turns = generations(record)
    assert turns and len(turns) == record["num_turns"]
    for turn in turns:
        ids, log_probs = turn["generation_token_ids"], turn["generation_log_probs"]
        assert ids and len(log_probs) == len(ids) and all(math.isfinite(lp) and lp <= 0 for lp in log_probs)
    calls = [o for o in record["response"]["output"] if o["type"] == "function_call"]
    assert len(record["tool_call_paths"]) == len(calls) == record["num_tool_calls"]
    assert set(record["tool_call_paths"]) <= PATHS


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:  # llama.cpp says why in the body
        raise AssertionError(f"{url}: {exc.code} {exc.read()[:2000]!r}") from exc


def assert_replays(llamacpp: str, record: dict) -> None:
    """The record's last turn replayed on the server: its prompt ids, the recorded ids forced one by one
    (a grammar of token ids): the model's log-probs for them are the recorded ones. Ids re-encoded from
    text, shifted or split differently would not score so (the ids and log-probs are also checked as the
    server returned them: llamacpp.read_completion)."""
    turn = generations(record)[-1]
    ids = turn["generation_token_ids"]
    # a turn that ended with the model's end token: that token left out (llama.cpp fails a grammar that forces an
    # end token: "Unexpected empty grammar stack"); the ids before it are replayed and scored
    if ids[-1] == local_model(MODEL).metadata["tokenizer.ggml.eos_token_id"] and len(ids) > 1:
        ids = ids[:-1]
    grammar = "root ::= " + " ".join(f"<[{i}]>" for i in ids)
    answer = post(
        f"{llamacpp}/completion",
        {"prompt": turn["prompt_token_ids"], "grammar": grammar, "n_predict": len(ids), "n_probs": 1}
        | {"return_tokens": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
    )
    assert answer["tokens"] == ids
    replayed = [e["logprob"] for e in answer["completion_probabilities"]]
    # the same ids scored again: equal up to float noise (the KV cache is batched otherwise on a replay; seen:
    # mean 0.0065, max 0.13 over 192 tokens); a token that was not the one sampled would be off by far more
    differences = [abs(a - b) for a, b in zip(replayed, turn["generation_log_probs"][: len(ids)], strict=True)]
    assert sum(differences) / len(differences) < 0.02 and max(differences) < 1.0, differences
