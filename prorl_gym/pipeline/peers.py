# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""HTTP to the other servers of the same ng_run, by name: fail fast, one keep-alive pool.

NeMo Gym's ServerClient retries connection errors without end (0.5 s apart): a rollout
whose resources server died would wait out its whole tool timeout, and a release or seed
could hang forever. Here a peer that does not accept the connection is an error at once
(aiohttp.ClientConnectorError), which the pipeline types as an infrastructure failure
and retries as a whole rollout; every call is also bounded by the caller's timeout.
Same interface as ServerClient.post/get (server name, path, json, cookies), and the same attribution:
inside a rollout's context (nemo_gym.rollout_correlation), a call is sent under the rollout's path
prefix where ServerClient.request would send it (NeMo Gym 0.7: the model server's generation routes
when observability or training-token capture is on, with capture's own segment for the latter; every
route of a resources server when observability is on), so NeMo Gym's capture and observability
attribute it to its rollout.

`exchange` is the one way a part of the agent calls a peer: the answer read whole (status, body,
cookies) or a typed error (TimeoutError past its time, PeerUnreachable when no answer could come);
`error_type` and `error_detail` are the one reader of an error answer's body, whichever server wrote it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import orjson
from nemo_gym.config_types import ROLLOUT_PATH_PREFIX
from nemo_gym.global_config import OBSERVABILITY_ENABLED_KEY_NAME, get_first_server_config_dict
from nemo_gym.rollout_correlation import current_rollout_id
from nemo_gym.server_utils import ServerClient, rollout_path_prefix
from pydantic import BaseModel

from prorl_gym.errors import ProrlError

CONNECT_TIMEOUT_S = 5.0
GENERATIONS = frozenset({"/v1/responses", "/v1/chat/completions", "/v1/messages"})  # what NeMo Gym attributes


class PeerClient:
    def __init__(
        self, server_client: ServerClient, connect_timeout_s: float = CONNECT_TIMEOUT_S, token_capture: bool = False
    ):
        """token_capture: NeMo Gym's training-token capture is on for the caller (the agent): its model calls
        go under capture's own path segment, where the model server records their ids."""
        self._config = server_client.global_config_dict
        self._connect_timeout_s = connect_timeout_s
        self._urls: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None
        self._observability = bool(self._config.get(OBSERVABILITY_ENABLED_KEY_NAME, False))
        self._token_capture = token_capture
        self._kinds: dict[str, str | None] = {}

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
        if (self._observability or self._token_capture) and (rollout_id := current_rollout_id()) is not None:
            url_path = self._attributed(server_name, url_path, rollout_id)
        return await self.session.request(method, self.url(server_name) + url_path, data=data, headers=headers)

    def _attributed(self, server_name: str, url_path: str, rollout_id: str) -> str:
        """`url_path` under the rollout's prefix where NeMo Gym's ServerClient.request would put it."""
        if url_path.startswith(f"/{ROLLOUT_PATH_PREFIX}/"):
            return url_path
        if server_name not in self._kinds:
            entry = self._config.get(server_name) or {}
            kinds = [k for k in ("responses_api_models", "resources_servers") if k in entry]
            self._kinds[server_name] = kinds[0] if kinds else None
        kind = self._kinds[server_name]
        if kind == "responses_api_models" and url_path.partition("?")[0] in GENERATIONS:
            return rollout_path_prefix(rollout_id, token_capture=self._token_capture) + url_path
        if kind == "resources_servers" and self._observability:
            return rollout_path_prefix(rollout_id) + url_path
        return url_path

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


class PeerUnreachable(ProrlError):
    """No answer could come: the connection failed or broke (aiohttp.ClientError). `refused`: the peer
    never accepted the connection, so nothing was sent (a call that cannot have had an effect)."""

    def __init__(self, server_name: str, error: Exception):
        self.reason = repr(error)
        self.refused = isinstance(error, aiohttp.ClientConnectorError)
        super().__init__(f"{server_name} is unreachable: {self.reason}")


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    status: int
    payload: bytes
    cookies: dict[str, str]  # what the peer set (a session's cookies, to send back with its next call)


async def exchange(
    client: Any,
    method: str,
    server_name: str,
    url_path: str,
    json: Any = None,
    cookies: dict | None = None,
    timeout: float | None = None,
) -> PeerAnswer:
    """One call to a peer, read whole within `timeout` (None: the caller bounds it). `client`: a PeerClient,
    or anything with its .post/.get (NeMo Gym's ServerClient, a test's stand-in)."""
    try:
        async with asyncio.timeout(timeout):
            if method == "get":
                response = await client.get(server_name=server_name, url_path=url_path, cookies=cookies)
            else:
                response = await client.post(server_name=server_name, url_path=url_path, json=json, cookies=cookies)
            payload = await response.read()
    except aiohttp.ClientError as exc:
        raise PeerUnreachable(server_name, exc) from exc
    return PeerAnswer(response.status, payload, {name: morsel.value for name, morsel in response.cookies.items()})


def _error_body(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None


def error_detail(payload: bytes) -> Any:
    """What an error answer says: FastAPI's `detail` or our servers' `error` where the body is a JSON
    object with one, else the body as text (a proxy's HTML page, a truncated body)."""
    body = _error_body(payload)
    if isinstance(body, dict):
        for key in ("detail", "error"):
            if key in body:
                return body[key]
    return payload.decode(errors="replace") if body is None else body


def error_type(payload: bytes) -> str | None:
    """The `type` of an error answer that has one: `error.type` (a resources server's, the supervisor's)
    or `detail.type` (a model server's HTTPException)."""
    detail = error_detail(payload)
    kind = detail.get("type") if isinstance(detail, dict) else None
    return kind if isinstance(kind, str) else None
