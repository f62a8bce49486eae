# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""HTTP to the other servers of the same ng_run, by name: fail fast, one keep-alive pool.

NeMo Gym's ServerClient retries connection errors without end (0.5 s apart): a rollout
whose resources server died would wait out its whole tool timeout, and a release or seed
could hang forever. Here a peer that does not accept the connection is an error at once
(aiohttp.ClientConnectorError), which the pipeline types as an infrastructure failure
and retries as a whole rollout; every call is also bounded by the caller's timeout.
Same interface as ServerClient.post/get (server name, path, json, cookies).
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import orjson
from nemo_gym.global_config import get_first_server_config_dict
from nemo_gym.server_utils import ServerClient
from pydantic import BaseModel

CONNECT_TIMEOUT_S = 5.0


class PeerClient:
    def __init__(self, server_client: ServerClient, connect_timeout_s: float = CONNECT_TIMEOUT_S):
        self._config = server_client.global_config_dict
        self._connect_timeout_s = connect_timeout_s
        self._urls: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None

    def url(self, server_name: str) -> str:
        if server_name not in self._urls:
            config = get_first_server_config_dict(self._config, server_name)
            self._urls[server_name] = f"http://{config.host}:{config.port}"
        return self._urls[server_name]

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:  # in the server's loop, on first use
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=15.0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, server_name: str, url_path: str, json: Any = None, cookies: dict | None = None
    ) -> aiohttp.ClientResponse:
        """The response (read its body with `await response.read()`); connection errors raise at once."""
        data, headers = None, {}
        if json is not None:
            body = json.model_dump(exclude_unset=True) if isinstance(json, BaseModel) else json
            data, headers = orjson.dumps(body), {"Content-Type": "application/json"}
        if cookies:  # as a header: aiohttp's `cookies=` builds a cookie jar per request (~0.1 ms)
            headers["Cookie"] = cookie_header(cookies)
        return await self.session.request(method, self.url(server_name) + url_path, data=data, headers=headers)

    async def post(self, server_name: str, url_path: str, json: Any = None, cookies: dict | None = None):
        return await self.request("POST", server_name, url_path, json, cookies)

    async def get(self, server_name: str, url_path: str, cookies: dict | None = None):
        return await self.request("GET", server_name, url_path, None, cookies)


def cookie_header(cookies: dict[str, str]) -> str:
    """A Cookie header's value: each name=value, quoted where a value needs it (as aiohttp would send them)."""
    jar = SimpleCookie()
    for name, value in cookies.items():
        jar[name] = value
    return "; ".join(morsel.OutputString() for morsel in jar.values())
