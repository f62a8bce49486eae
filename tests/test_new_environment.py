# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Adding an environment is adding its folder. A fifth environment, `echo`, written here into a new
folder of a scratch checkout (the library and the agent and model servers linked in, none of the
four environments), is found, composed into configs/echo.yaml, served by a real ng_run and
collected by ng_collect_rollouts with the scripted policy, its verifier scoring the sandbox's
state, its report fields in the evaluation report: no edit anywhere outside its folder. (What the
test does besides writing the folder is what `make setup` and `make configs` do in a checkout:
link the server's venv, write the compositions.)"""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from prorl_gym.environments import discover, environment, write_compositions
from prorl_gym.evaluation.report import build_report
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import Stack, collected_records
from prorl_gym.testing import traversable_dir

LINKED = (
    "prorl_gym",
    "responses_api_agents/prorl_agent",
    "responses_api_models/balanced_vllm_model",
    "environment_servers/prorl_agent",
)

APP = '''
"""Echo: write the row's word into answer.txt; the verifier reads it back from the sandbox."""

from pydantic import BaseModel, ConfigDict

from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxVerifyRequest,
    SandboxVerifyResponse,
    SeedSessionRequest,
)
from prorl_gym.sandbox import SandboxFileNotFound


class EchoTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    word: str


class EchoSeedRequest(EchoTask, SeedSessionRequest):
    pass


class EchoVerifyRequest(EchoTask, SandboxVerifyRequest):
    pass


class EchoVerifyResponse(SandboxVerifyResponse):
    written: str | None = None


class EchoResourcesServer(SandboxResourcesServer):
    seed_request = EchoSeedRequest
    verify_request = EchoVerifyRequest
    verify_response = EchoVerifyResponse

    async def evaluate(self, body, sandbox):
        try:
            written = (await sandbox.read_file("answer.txt")).strip()
        except SandboxFileNotFound:
            written = None
        return {"reward": 1.0 if written == body.word else 0.0, "written": written}


if __name__ == "__main__":
    EchoResourcesServer.run_webserver()
'''

CONFIG = """
echo:
  resources_servers:
    echo:
      entrypoint: app.py
      domain: other
      verified: false
      description: Write a word into a file with bash
      tools: [bash]
      report:
        categorical: [written]
      sandbox:
        backend: local
echo_agent:
  responses_api_agents:
    prorl_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: echo}
      model_server: {type: responses_api_models, name: policy_model}
      limits: {max_turns: 4}
      datasets:
      - {name: example, type: example, jsonl_fpath: resources_servers/echo/data/example.jsonl}
echo_environment_server:
  environment_servers:
    prorl_agent:
      entrypoint: app.py
      agent_server: {type: responses_api_agents, name: echo_agent}
"""

SCRIPTED = '''
"""The echo environment's recorded actions: the word written with bash (wrong: another word)."""

from prorl_gym.scripted import Step, call


def script(row, mode, tool_calls=1):
    word = row["word"] if mode != "wrong" else row["word"][::-1] + "x"
    return [Step(tool_calls=[call("bash", {"command": f"echo {word} > answer.txt"})]), Step(content="Done.")]
'''

WORDS = ["apple", "river", "stone"]


def rows(mode: str) -> list[dict]:
    return [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": f"Write the word {word} into answer.txt."}],
                "metadata": {"scripted_mode": mode},
            },
            "task_id": f"echo/{i}",
            "word": word,
        }
        for i, word in enumerate(WORDS)
    ]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def checkout():
    root = Path(tempfile.mkdtemp(prefix="prorl-newenv-", dir="/tmp"))
    for path in LINKED:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(REPO_ROOT / path)
    (root / "configs").mkdir()
    shutil.copy(REPO_ROOT / "configs" / "base.yaml", root / "configs" / "base.yaml")
    # The new environment: its folder, and nothing else.
    folder = root / "resources_servers" / "echo"
    (folder / "configs").mkdir(parents=True)
    (folder / "app.py").write_text(textwrap.dedent(APP).lstrip())
    (folder / "scripted.py").write_text(textwrap.dedent(SCRIPTED).lstrip())
    (folder / "configs" / "echo.yaml").write_text(textwrap.dedent(CONFIG).lstrip())
    (folder / "requirements.txt").write_text("-e ../..\n")
    write_jsonl(folder / "data" / "example.jsonl", rows("gold"))
    # What `make setup` (link-venvs) and `make configs` do for every server folder they find.
    for server in ("resources_servers/echo", *LINKED[1:]):
        (root / ".venvs" / server).mkdir(parents=True)
        (root / ".venvs" / server / ".venv").symlink_to(REPO_ROOT / ".venv")
    write_compositions(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(checkout, tmp_path_factory, ray_cluster):
    sandbox_root = traversable_dir("prorl-newenv-sb-")
    echo = environment("echo", checkout)
    with Stack(
        ["configs/echo.yaml"],  # the composition `make configs` wrote, as a user runs it
        overrides=[f"+{echo.server_key}.sandbox.root_dir={sandbox_root}"],
        policy_data=[str(echo.example)],
        log_dir=tmp_path_factory.mktemp("newenv") / "logs",
        root=checkout,
        ray=ray_cluster,
    ) as stack:
        yield stack
    shutil.rmtree(sandbox_root, ignore_errors=True)


def test_the_new_folder_is_found_and_composed(checkout):
    (echo,) = discover(checkout)
    assert (echo.name, echo.agent, echo.tools) == ("echo", "echo_agent", ["bash"])
    assert echo.environment_server == "echo_environment_server"
    composed = (checkout / "configs" / "echo.yaml").read_text()
    assert "resources_servers/echo/configs/echo.yaml" in composed


def test_ng_run_serves_it_and_its_verifier_scores_rollouts(checkout, stack, tmp_path):
    scored = {}
    for mode in ("gold", "wrong"):
        output = tmp_path / f"{mode}.jsonl"
        stack.collect("echo_agent", write_jsonl(tmp_path / f"{mode}_rows.jsonl", rows(mode)), output)
        records = collected_records(output)
        assert not [r["failure"] for r in records if r["failure"]]
        # collected through the environment server its config declares, which the agent's process serves
        assert {r["_ng_environment_server"] for r in records} == {"echo_environment_server"}
        scored[mode] = sorted((r["task_id"], r["reward"], r["written"]) for r in records)
    assert scored["gold"] == [(f"echo/{i}", 1.0, word) for i, word in enumerate(WORDS)]
    assert [reward for _, reward, _ in scored["wrong"]] == [0.0] * len(WORDS)
    records = collected_records(tmp_path / "gold.jsonl")
    metrics = build_report(records, tmp_path / "report", {"env": "echo"}, fields=environment("echo", checkout).report)
    assert set(metrics["extras"]["categorical"]["written"]) == set(WORDS)
