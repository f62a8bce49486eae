# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent serves its environment servers' addresses itself (NeMo Gym 0.7's front door).

NeMo Gym 0.7 collects rollouts through environment servers: `ng_collect_rollouts` posts a row to the
environment server that names the agent, never to the agent. Its `legacy_agent` relay would read each
row and each record (megabytes with token ids) and send them on, in a process of its own. Instead an
environment server of type `prorl_agent` (environment_servers/prorl_agent) is this process: the agent
listens on that server's address too, with the same app, so its `/run` there is the agent's `/run`.

The second listener is a uvicorn server over the app the main one serves, without a lifespan (the
main server runs it) and without signal handlers (the main server's stop ends it, in the app's
shutdown), bound when the app starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import uvicorn
from nemo_gym.global_config import AGENT_SERVER_TYPE_KEY_NAME, ENVIRONMENT_SERVER_TYPE_KEY_NAME

log = logging.getLogger(__name__)

ENVIRONMENT_SERVER_TYPE = "prorl_agent"  # environment_servers/prorl_agent


def front_door_addresses(global_config: Mapping[str, Any], agent_name: str) -> list[tuple[str, str, int]]:
    """(environment server, host, port) of every `prorl_agent` environment server that names `agent_name`."""
    found = []
    for name, instance in global_config.items():
        servers = instance.get(ENVIRONMENT_SERVER_TYPE_KEY_NAME) if isinstance(instance, Mapping) else None
        server = servers.get(ENVIRONMENT_SERVER_TYPE) if isinstance(servers, Mapping) else None
        if not isinstance(server, Mapping):
            continue
        agent = server.get("agent_server")
        if (
            not isinstance(agent, Mapping)
            or agent.get("type", AGENT_SERVER_TYPE_KEY_NAME) != AGENT_SERVER_TYPE_KEY_NAME
        ):
            continue
        if agent.get("name") == agent_name:
            found.append((str(name), str(server["host"]), int(server["port"])))
    return found


class FrontDoor:
    """Serve `app` on more addresses, from inside the app's lifespan (start at startup, close at shutdown)."""

    def __init__(self, app: Any, addresses: list[tuple[str, str, int]]):
        self.app = app
        self.addresses = addresses
        self._servers: list[tuple[uvicorn.Server, asyncio.Task]] = []

    async def start(self) -> None:
        for name, host, port in self.addresses:
            config = uvicorn.Config(
                self.app,
                host=host,
                port=port,
                lifespan="off",
                http="httptools",
                timeout_keep_alive=30,  # above the clients' keep-alive, as NeMo Gym sets its servers
                timeout_graceful_shutdown=0.5,  # as NeMo Gym's: requests still open then are cancelled
                access_log=False,
                log_config=None,
            )
            config.load()
            server = uvicorn.Server(config)
            server.lifespan = config.lifespan_class(config)  # "off": the main server runs the app's lifespan
            await server.startup()  # binds host:port (exits the process if it cannot, as the main server)
            self._servers.append((server, asyncio.create_task(server.main_loop(), name=f"front-door-{name}")))
            log.info("serving environment server %s on %s:%d", name, host, port)

    async def close(self) -> None:
        for server, main_loop in self._servers:
            server.should_exit = True
            await main_loop
            await server.shutdown()
        self._servers.clear()
