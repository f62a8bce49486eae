# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Environments are folders: a new one is found by the demo, the eval command, `make data` and
the ng_run compositions without an edit anywhere else."""

import json
import textwrap

import pytest
import yaml

from prorl_gym.demo import chosen_environments
from prorl_gym.environments import all_config_paths, discover, environment, write_compositions
from prorl_gym.evaluation.splits import SplitError, prepared, resolve
from prorl_gym.paths import REPO_ROOT

TOY_CONFIG = """\
toy:
  resources_servers:
    toy:
      entrypoint: app.py
      domain: other
      tools: [bash]
toy_agent:
  responses_api_agents:
    prorl_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: toy}
      model_server: {type: responses_api_models, name: policy_model}
      datasets:
      - {name: example, type: example, jsonl_fpath: resources_servers/toy/data/example.jsonl}
      - {name: toy_validation, type: validation, jsonl_fpath: resources_servers/toy/data/validation.jsonl, license: MIT}
"""


@pytest.fixture
def root(tmp_path):
    """A checkout with the real environments' configs and a minimal new one, `toy`."""
    for env in discover():
        target = tmp_path / env.config_path.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True)
        target.write_text(env.config_path.read_text())
    toy = tmp_path / "resources_servers" / "toy"
    (toy / "configs").mkdir(parents=True)
    (toy / "data").mkdir()
    (toy / "configs" / "toy.yaml").write_text(TOY_CONFIG)
    (toy / "app.py").write_text("# a resources server\n")
    (toy / "data" / "example.jsonl").write_text(json.dumps({"responses_create_params": {"input": "hi"}}) + "\n")
    (toy / "data" / "prepare.py").write_text(
        textwrap.dedent(
            """\
            import json, pathlib
            print('preparing toy')
            row = {"responses_create_params": {"input": "hi"}}
            (pathlib.Path(__file__).parent / "validation.jsonl").write_text(json.dumps(row) + "\\n")
            """
        )
    )
    (tmp_path / "configs").mkdir()
    return tmp_path


def test_every_environment_folder_is_found_with_its_agent_tools_example_and_report():
    """Whatever folders there are: each resources_servers/<name>/ with configs/<name>.yaml is one."""
    folders = sorted(p.parent.parent.name for p in REPO_ROOT.glob("resources_servers/*/configs/*.yaml"))
    found = discover()
    assert [env.name for env in found] == folders and len(found) >= 1
    for env in found:
        assert env.agent.endswith("_agent") and env.tools, env.name
        assert env.example.exists() and env.example.is_relative_to(env.folder), env.name
        assert all(tool in env.server_config["tools"] for tool in env.tools)
        assert (env.folder / "requirements.txt").exists()  # its own dependencies


def test_a_new_folder_is_picked_up_by_the_demo_the_eval_and_the_compositions(root):
    assert [env.name for env in chosen_environments(None, root)] == ["code", "math", "stem", "swe", "toy"]
    toy = environment("toy", root)
    assert (toy.agent, toy.tools, toy.server_key, toy.agent_key) == (
        "toy_agent",
        ["bash"],
        "toy.resources_servers.toy",
        "toy_agent.responses_api_agents.prorl_agent",
    )
    assert resolve("toy", "example", root).path == root / "resources_servers/toy/data/example.jsonl"
    with pytest.raises(SplitError, match=r"generate it with `.*resources_servers/toy/data/prepare.py`"):
        resolve("toy", "validation", root)  # declared, not generated yet: says how to make it
    assert toy.prepare_script == root / "resources_servers/toy/data/prepare.py"
    # make eval prepares a missing split with the environment's own script, once
    assert prepared("toy", "validation", root).path == root / "resources_servers/toy/data/validation.jsonl"
    assert resolve("toy", "validation", root).path.exists()
    write_compositions(root)
    everything = yaml.safe_load((root / "configs" / "all.yaml").read_text())["config_paths"]
    assert "resources_servers/toy/configs/toy.yaml" in everything
    assert everything == all_config_paths(discover(root))
    assert yaml.safe_load((root / "configs" / "toy.yaml").read_text())["config_paths"] == toy.config_paths()


def test_an_unknown_environment_is_named_with_those_found(root):
    with pytest.raises(SystemExit, match="unknown environments \\['chess'\\]"):
        chosen_environments("chess,math", root)
    with pytest.raises(SplitError, match="unknown environment 'chess'.*toy"):
        resolve("chess", "example", root)


def test_a_prepare_script_that_fails_is_said_with_the_split_it_did_not_write(root):
    (root / "resources_servers/toy/data/prepare.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(SplitError, match=r"prepare.py failed \(3\); resources_servers/toy/data/validation.jsonl"):
        prepared("toy", "validation", root)
