# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""prorl-gym and NeMo Gym's own servers, both ways, under one real ng_run with the scripted policy,
spelled as nemo-gym prefers (`gym env start`, `gym eval run --no-serve`; every other stack
of the suite spells it ng_run and ng_collect_rollouts):

- our prorl_agent driving NeMo Gym's `math_with_code` resources server (no /tools: the rows bring
  their tools; its tool answers are passed on whole, as its simple_agent does);
- NeMo Gym's `simple_agent` driving our math resources server.

Features that need our servers (sandboxes, /tools and tools that end a rollout, snapshots and
branches, shared INIT) are simply not used against theirs; a route a server lacks is a typed,
non-retried failure."""

from __future__ import annotations

import json
import tempfile
import urllib.request
from pathlib import Path

import pytest

from benchmarks.peer_nemo_gym import PEER_AGENT, PEER_RELAY, PEER_SERVER, SITE, peer_rows
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import BIN, Stack, collected_records
from prorl_gym.testing import traversable_dir

MATH_EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
OURS = (
    "resources_servers/math",
    "responses_api_agents/prorl_agent",
    "responses_api_models/balanced_vllm_model",
    "environment_servers/prorl_agent",
)
CONFIG = """
prorl_on_nemo_gym:
  responses_api_agents:
    prorl_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: math_with_code}
      model_server: {type: responses_api_models, name: policy_model}
      limits: {max_turns: 8, policy_call_timeout_s: 30, tool_call_timeout_s: 30}
nemo_gym_on_prorl:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: math}
      model_server: {type: responses_api_models, name: policy_model}
      max_steps: 8
# NeMo Gym 0.7 collects through environment servers: ours, served by our agent, and its own legacy_agent
# relay for its simple_agent (as its own configs declare one)
prorl_on_nemo_gym_environment_server:
  environment_servers:
    prorl_agent:
      entrypoint: app.py
      agent_server: {type: responses_api_agents, name: prorl_on_nemo_gym}
nemo_gym_on_prorl_environment_server:
  environment_servers:
    legacy_agent:
      entrypoint: app.py
      agent_server: {type: responses_api_agents, name: nemo_gym_on_prorl}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    scratch = Path(tempfile.mkdtemp(prefix="prorl-interop-", dir="/tmp"))
    links = {PEER_SERVER: SITE / PEER_SERVER, PEER_AGENT: SITE / PEER_AGENT, PEER_RELAY: SITE / PEER_RELAY}
    links |= {path: REPO_ROOT / path for path in ("configs", "prorl_gym", *OURS)}
    for path in (PEER_SERVER, PEER_AGENT, PEER_RELAY, *OURS):
        links[f".venvs/{path}/.venv"] = REPO_ROOT / ".venv"
    for name, target in links.items():
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        (scratch / name).symlink_to(target)
    (scratch / "interop.yaml").write_text(CONFIG)
    sandbox_root = traversable_dir("prorl-interop-sb-")
    configs = [
        "configs/base.yaml",
        f"{PEER_SERVER}/configs/math_with_code.yaml",
        "resources_servers/math/configs/math.yaml",
        "responses_api_models/balanced_vllm_model/configs/balanced_vllm_model.yaml",
        "interop.yaml",
    ]
    logs = tmp_path_factory.mktemp("interop") / "logs"
    with Stack(
        configs,
        overrides=[f"+math.resources_servers.math.sandbox.root_dir={sandbox_root}"],
        policy_data=[str(MATH_EXAMPLE)],
        policy_args=["--tool-alias", "python=execute_python"],  # NeMo Gym's tool for the same actions
        log_dir=logs,
        root=scratch,
        start_command=[str(BIN / "gym"), "env", "start"],
        collect_command=[str(BIN / "gym"), "eval", "run", "--no-serve"],
        ray=ray_cluster,
    ) as stack:
        stack.scratch = scratch
        yield stack


def test_prorl_agent_drives_nemo_gyms_own_resources_server(stack):
    rows = stack.scratch / "peer_rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in peer_rows()))
    output = stack.scratch / "prorl_on_nemo_gym.jsonl"
    stack.collect("prorl_on_nemo_gym", rows, output)
    records = collected_records(output)
    assert len(records) == 5 and not [r["failure"] for r in records if r["failure"]]
    assert [r["reward"] for r in records] == [1.0] * 5  # math_with_code's own verifier
    for record in records:
        outputs = [o["output"] for o in record["response"]["output"] if o["type"] == "function_call_output"]
        assert outputs and json.loads(outputs[0]).get("stdout") is not None  # its answer, passed on whole
        assert record["token_ids_contiguous"] is True


def test_a_route_a_server_lacks_fails_once_typed(stack):
    """The row offers a tool NeMo Gym's server has no route for (`calculator`), and the policy (malformed
    mode) calls it: a typed tool_error, not retried."""
    row = peer_rows()[0]
    params = row["responses_create_params"]
    calculator = {
        "type": "function",
        "name": "calculator",
        "strict": False,
        "description": "evaluates",
        "parameters": {"type": "object", "properties": {}},
    }
    row["responses_create_params"] = params | {
        "tools": [*params["tools"], calculator],
        "metadata": {"scripted_mode": "malformed"},
    }
    path, output = stack.scratch / "calculator.jsonl", stack.scratch / "calculator_out.jsonl"
    path.write_text(json.dumps(row) + "\n")
    stack.collect("prorl_on_nemo_gym", path, output)
    (record,) = collected_records(output)
    failure = record["failure"]
    assert failure["type"] == "tool_error" and failure["infra"] is False and "(404)" in failure["message"], failure
    assert record["attempts"] == 1


def test_nemo_gyms_simple_agent_drives_our_math_server(stack):
    with urllib.request.urlopen(f"{stack.server_urls()['math']}/tools", timeout=10) as response:
        tools = json.load(response)["tools"]
    rows = [
        r | {"responses_create_params": r["responses_create_params"] | {"tools": tools}}
        for r in read_jsonl(MATH_EXAMPLE)
    ]
    path = stack.scratch / "ours_for_simple_agent.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    output = stack.scratch / "nemo_gym_on_prorl.jsonl"
    stack.collect("nemo_gym_on_prorl", path, output)
    records = read_jsonl(output)
    assert [r["reward"] for r in records] == [1.0] * 5
