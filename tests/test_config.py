# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Config a user writes refuses unknown keys, naming each with the nearest valid one; every shipped
composition still loads through NeMo Gym's own parser, with the keys NeMo Gym itself reads."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from nemo_gym.global_config import GlobalConfigDictParser
from omegaconf import OmegaConf
from pydantic import ValidationError

from prorl_gym.config import StrictConfig, nemo_gym_server_keys
from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import SandboxSpec
from prorl_gym.wire.jobs import SubmitRequest
from resources_servers.math.app import MathResourcesServerConfig
from responses_api_agents.prorl_agent.app import ProRLAgentConfig

AGENT_CONFIGS = sorted((REPO_ROOT / "responses_api_agents").glob("*/configs/*.yaml"))
# configs/base.yaml holds the keys every composition shares, no server
COMPOSITIONS = sorted(p.name for p in (REPO_ROOT / "configs").glob("*.yaml") if p.name != "base.yaml")


def compose(config_paths: list[str], overrides: dict | None = None):
    """The global config as ng_run builds it (NeMo Gym's parser), with Hydra-like dotted overrides."""
    initial = OmegaConf.create({"config_paths": config_paths})
    for key, value in (overrides or {}).items():
        OmegaConf.update(initial, key, value, force_add=True)
    return GlobalConfigDictParser().parse_no_environment(initial_global_config_dict=initial)


def config_model(server_type: str, kind: str, entrypoint: str) -> type:
    """A server's config model: its server class's `config` field; a server whose process only holds its
    place (environment_servers/prorl_agent: the agent serves its address) keeps it in config.py (CONFIG)."""
    try:
        return importlib.import_module(f"{server_type}.{kind}.config").CONFIG
    except ModuleNotFoundError:
        pass
    module = importlib.import_module(f"{server_type}.{kind}.{Path(entrypoint).stem}")
    server_cls = next(
        c
        for c in vars(module).values()
        if isinstance(c, type) and c.__module__ == module.__name__ and "config" in getattr(c, "model_fields", {})
    )
    return server_cls.model_fields["config"].annotation


def server_configs(global_config) -> dict[str, object]:
    """Each server instance's config, validated by its own server class's config model."""
    parser, validated = GlobalConfigDictParser(), {}
    for instance in parser.filter_for_server_instance_configs(global_config):
        server_type = instance.SERVER_TYPE
        kind = next(iter(global_config[instance.name][server_type]))
        inner = global_config[instance.name][server_type][kind]
        config_cls = config_model(server_type, kind, inner.entrypoint)
        data = OmegaConf.to_container(inner, resolve=True) | {"name": instance.name}
        validated[instance.name] = config_cls.model_validate(data)
    return validated


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # config paths are relative to the checkout, as for ng_run


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_every_composition_loads_strictly(composition):
    configs = server_configs(compose([f"configs/{composition}"]))
    assert configs, "a composition without servers"


@pytest.mark.parametrize("agent_config", [p.relative_to(REPO_ROOT).as_posix() for p in AGENT_CONFIGS])
def test_agent_configs_load_strictly_beside_their_environment(agent_config):
    configs = server_configs(compose(["configs/swe.yaml", agent_config]))
    assert any(isinstance(c, ProRLAgentConfig) and c.harness for c in configs.values())


def test_a_misspelt_sandbox_key_in_yaml_is_refused_naming_it():
    global_config = compose(["configs/math.yaml"], {"math.resources_servers.math.sandbox.comand_timeout_s": 60})
    with pytest.raises(ValidationError) as caught:
        server_configs(global_config)
    message = str(caught.value)
    assert "unknown key 'comand_timeout_s'" in message
    assert "did you mean 'command_timeout_s'?" in message


@pytest.mark.parametrize(
    ("data", "key", "nearest"),
    [
        ({"comand_timeout_s": 60}, "comand_timeout_s", "command_timeout_s"),
        ({"limits": {"cpu_time": 5}}, "cpu_time", "cpu_time_s"),
        ({"binds": [{"src": "/data", "writeable": True}]}, "writeable", "writable"),
        ({"backend": {"kind": "local", "isolatoin": "none"}}, "isolatoin", "isolation"),
    ],
)
def test_sandbox_spec_refuses_unknown_keys_at_any_depth(data, key, nearest):
    with pytest.raises(ValidationError) as caught:
        SandboxSpec.model_validate(data)
    assert f"unknown key {key!r}; did you mean {nearest!r}?" in str(caught.value)


def test_a_key_with_no_near_name_is_refused_with_the_valid_ones():
    with pytest.raises(ValidationError) as caught:
        SandboxSpec.model_validate({"zzz": 1})
    assert "unknown key 'zzz' (valid keys: backend, binds, command_timeout_s" in str(caught.value)


def test_server_configs_refuse_their_own_typos_and_accept_nemo_gyms_keys():
    base = {"host": "127.0.0.1", "port": 1, "entrypoint": "app.py", "name": "math", "domain": "math"}
    nemo_gym_keys = {"description": "d", "verified": False, "value": "v", "verified_url": None, "datasets": []}
    config = MathResourcesServerConfig.model_validate(base | nemo_gym_keys | {"verifier_workers": 1})
    assert config.verifier_workers == 1
    with pytest.raises(ValidationError, match="unknown key 'verifier_worker'; did you mean 'verifier_workers'"):
        MathResourcesServerConfig.model_validate(base | {"verifier_worker": 1})
    agent = {"host": "127.0.0.1", "port": 1, "entrypoint": "app.py", "name": "a"}
    refs = {
        "resources_server": {"type": "resources_servers", "name": "math"},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
    }
    with pytest.raises(ValidationError, match="unknown key 'max_turn'; did you mean 'max_turns'"):
        ProRLAgentConfig.model_validate(agent | refs | {"limits": {"max_turn": 3}})
    assert ProRLAgentConfig.model_validate(agent | refs | {"datasets": []}).limits.max_turns == 20
    assert {"entrypoint", "domain", "datasets", "description", "verified"} <= nemo_gym_server_keys()


def test_job_api_options_refuse_misspelt_keys():
    with pytest.raises(ValidationError, match="unknown key 'sample_per_row'; did you mean 'samples_per_row'"):
        SubmitRequest.model_validate({"rows": [{}], "sample_per_row": 4})
    # sampling overrides pass other fields through to the policy on purpose (seed, ...)
    assert SubmitRequest.model_validate({"rows": [], "sampling": {"seed": 1}}).sampling.model_extra == {"seed": 1}


def test_aliases_are_valid_keys():
    from pydantic import Field

    class Aliased(StrictConfig):
        value: int = Field(0, alias="v")

    assert Aliased.model_validate({"v": 3}).value == 3
    with pytest.raises(ValidationError, match="unknown key 'vv'"):
        Aliased.model_validate({"vv": 3})
