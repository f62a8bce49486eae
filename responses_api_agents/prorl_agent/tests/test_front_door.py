# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym 0.7 reaches every agent through an environment server. Each of our environments declares
one for its agent (environment_servers/prorl_agent), so NeMo Gym's own config resolution generates no
`legacy_agent` relay, and the agent's process serves that server's address (front_door.py). The stacks
of the end-to-end tests collect through it (their records name it)."""

from __future__ import annotations

import logging

import aiohttp
import pytest
from fastapi import FastAPI, Request
from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
from omegaconf import DictConfig, OmegaConf

from prorl_gym.environments import BASE_CONFIG, POLICY_CONFIG, all_config_paths, discover
from prorl_gym.lifespan import run_with_app
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import free_port
from prorl_gym.testing import served_app
from responses_api_agents.prorl_agent.front_door import ENVIRONMENT_SERVER_TYPE, FrontDoor, front_door_addresses

HARNESS_CONFIGS = sorted((REPO_ROOT / "responses_api_agents" / "prorl_agent" / "configs").glob("*.yaml"))


def resolve(config_paths: list[str], monkeypatch) -> DictConfig:
    """The config as ng_run resolves it (NeMo Gym 0.7's parser, offline: no ports probed)."""
    monkeypatch.chdir(REPO_ROOT)
    initial = OmegaConf.create({"config_paths": config_paths})
    parser_config = GlobalConfigDictParserConfig(
        initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True, offline=True
    )
    return GlobalConfigDictParser().parse(parser_config)


def environment_servers(config: DictConfig) -> dict[str, str]:
    """environment server -> its type, for every one in the resolved config."""
    return {
        str(name): str(next(iter(value["environment_servers"])))
        for name, value in config.items()
        if isinstance(value, DictConfig) and "environment_servers" in value
    }


@pytest.mark.parametrize(
    "config_paths",
    [
        *([BASE_CONFIG, str(env.config_path.relative_to(REPO_ROOT)), POLICY_CONFIG] for env in discover()),
        all_config_paths(discover()),
        *(
            [*all_config_paths(discover()), str(path.relative_to(REPO_ROOT))]  # a harness agent beside them all
            for path in HARNESS_CONFIGS
        ),
    ],
    ids=lambda paths: "+".join(p.rsplit("/", 1)[-1].removesuffix(".yaml") for p in paths[1:-1] if "/" in p) or "all",
)
def test_no_relay_is_generated_and_each_agent_has_its_front_door(config_paths, monkeypatch, caplog):
    with caplog.at_level(logging.WARNING):
        config = resolve(config_paths, monkeypatch)
    assert "agents without an environment server" not in caplog.text
    servers = environment_servers(config)
    assert servers and set(servers.values()) == {ENVIRONMENT_SERVER_TYPE}, servers  # no legacy_agent anywhere
    agents = [
        name for name, value in config.items() if isinstance(value, DictConfig) and "responses_api_agents" in value
    ]
    for agent in agents:  # exactly one address per agent, on the port NeMo Gym gave its environment server
        ((server, host, port),) = front_door_addresses(config, agent)
        inner = config[server]["environment_servers"][ENVIRONMENT_SERVER_TYPE]
        assert (host, port) == (inner.host, inner.port) and server in servers


def test_every_environment_names_the_environment_server_of_its_agent():
    for env in discover():
        assert env.environment_server == f"{env.name}_environment_server", env.name


def test_front_door_addresses_are_only_those_of_our_type_naming_this_agent():
    config = {
        "a_env": {"environment_servers": {"prorl_agent": {"host": "h", "port": 1, "agent_server": {"name": "a"}}}},
        "b_env": {"environment_servers": {"prorl_agent": {"host": "h", "port": 2, "agent_server": {"name": "b"}}}},
        "relay": {"environment_servers": {"legacy_agent": {"host": "h", "port": 3, "agent_server": {"name": "a"}}}},
        "a": {"responses_api_agents": {"prorl_agent": {"host": "h", "port": 4}}},
        "policy_base_url": "http://x",
    }
    assert front_door_addresses(config, "a") == [("a_env", "h", 1)]
    assert front_door_addresses(config, "c") == []


async def test_the_app_answers_on_its_front_door_from_startup_to_shutdown():
    """One app, two addresses: the main server's and the front door's, opened inside the app's lifespan
    (after what starts before it), closed at its shutdown; a request there is the app's own."""
    app = FastAPI()
    started = []

    @app.post("/run")
    async def run(request: Request) -> dict:
        return {"row": await request.json(), "port": request.url.port, "started": started}

    main_port, door_port = free_port(), free_port()
    door = FrontDoor(app, [("toy_environment_server", "127.0.0.1", door_port)])
    run_with_app(app, door.start, door.close)
    run_with_app(app, lambda: started.append("agent"), _nothing)  # registered later: runs before the door opens
    async with served_app(app, port=main_port), aiohttp.ClientSession() as http:
        for port in (main_port, door_port):
            async with http.post(f"http://127.0.0.1:{port}/run", json={"task": 1}) as response:
                assert response.status == 200
                assert await response.json() == {"row": {"task": 1}, "port": port, "started": ["agent"]}
    with pytest.raises(aiohttp.ClientConnectorError):  # closed with the app
        async with aiohttp.ClientSession() as http:
            await http.post(f"http://127.0.0.1:{door_port}/run", json={})


async def _nothing() -> None:
    return None
