# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A lean async client of the Docker Engine API over its Unix socket (Docker's, or Podman's
`podman system service`): the few calls the container backend makes, one aiohttp session per
socket, kept open for the backend's life."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp

from prorl_gym.sandbox.errors import SandboxStartError

API = "/v1.41"  # Docker 20.10 and Podman 4 both serve it
DEFAULT_SOCKETS = ("/run/podman/podman.sock", "/var/run/docker.sock")


class EngineError(SandboxStartError):
    """The engine refused or failed a call (its status and message), or cannot be reached."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def default_socket() -> str | None:
    """$DOCKER_HOST (unix://), else Podman's or Docker's usual root socket, whichever exists."""
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return host.removeprefix("unix://")
    return next((path for path in DEFAULT_SOCKETS if os.path.exists(path)), None)


class Engine:
    def __init__(self, socket_path: str):
        self.socket_path = socket_path
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.UnixConnector(path=self.socket_path, limit=64)
            # no total timeout: an image import may take minutes; each caller bounds its own wait
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None, data: Any = None
    ) -> Any:
        """One call; its JSON answer (None if empty). EngineError on a status >= 400 or no engine."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        payload = json.dumps(body) if body is not None else data
        status, text = await self._exchange(method, path, params=params, data=payload, headers=headers)
        if status >= 400:
            try:
                message = json.loads(text).get("message", text)
            except (ValueError, AttributeError):
                message = text
            raise EngineError(f"{method} {path}: {status} {message}", status)
        return json.loads(text) if text.strip() else None

    async def _exchange(self, method: str, path: str, **kwargs: Any) -> tuple[int, str]:
        """One request and its answer (status, text): the one place a missing engine becomes an EngineError."""
        try:
            async with self._client().request(method, f"http://engine{API}{path}", **kwargs) as response:
                return response.status, await response.text()
        except aiohttp.ClientConnectionError as exc:
            raise EngineError(f"container engine at {self.socket_path} unreachable: {exc}") from exc

    async def ping(self) -> None:
        status, _ = await self._exchange("GET", "/_ping")
        if status != 200:
            raise EngineError(f"container engine at {self.socket_path} answered {status}")

    # ---------------------------------------------------------------- containers

    async def create(self, name: str, config: dict[str, Any]) -> str:
        return (await self.call("POST", "/containers/create", params={"name": name}, body=config))["Id"]

    async def start(self, container: str) -> None:
        await self.call("POST", f"/containers/{quote(container)}/start")

    async def inspect(self, container: str) -> dict[str, Any]:
        return await self.call("GET", f"/containers/{quote(container)}/json")

    async def wait(self, container: str) -> int:
        """Until the container stops; its exit code."""
        return (await self.call("POST", f"/containers/{quote(container)}/wait"))["StatusCode"]

    async def logs(self, container: str) -> str:
        try:
            async with self._client().get(
                f"http://engine{API}/containers/{quote(container)}/logs", params={"stdout": "1", "stderr": "1"}
            ) as response:
                raw = await response.read()
        except aiohttp.ClientConnectionError:
            return ""
        return strip_stream_headers(raw).decode(errors="replace")

    async def remove(self, container: str) -> bool:
        """Kill and remove it (and its anonymous volumes); False if there was none."""
        try:
            await self.call("DELETE", f"/containers/{quote(container)}", params={"force": "true", "v": "true"})
        except EngineError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def list(self, labels: dict[str, str | None]) -> list[dict[str, Any]]:
        """Every container (running or not) carrying all these labels (None: with any value)."""
        filters = json.dumps({"label": [key if value is None else f"{key}={value}" for key, value in labels.items()]})
        return await self.call("GET", "/containers/json", params={"all": "true", "filters": filters})

    # ---------------------------------------------------------------- images

    async def has_image(self, image: str) -> bool:
        try:
            await self.call("GET", f"/images/{quote(image, safe='')}/json")
        except EngineError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def images(self, reference: str) -> list[str]:
        """The tags (repository:tag) of the images whose name matches `reference`."""
        listed = await self.call("GET", "/images/json", params={"filters": json.dumps({"reference": [reference]})})
        return [tag for image in listed for tag in image.get("RepoTags") or []]

    async def remove_image(self, image: str) -> bool:
        """Remove an image no container uses; False if it is in use or gone."""
        try:
            await self.call("DELETE", f"/images/{quote(image, safe='')}")
        except EngineError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    async def import_image(self, repository: str, tag: str, tar_chunks: AsyncIterator[bytes]) -> None:
        """`docker import`: a root file system tar (streamed) becomes image repository:tag."""
        params = {"fromSrc": "-", "repo": f"{repository}:{tag}"}  # Podman ignores `tag`; Docker takes both
        headers = {"Content-Type": "application/x-tar"}
        status, text = await self._exchange("POST", "/images/create", params=params, data=tar_chunks, headers=headers)
        if status >= 400 or any("error" in message for message in json_lines(text)):
            raise EngineError(f"importing {repository}:{tag} failed: {status} {text[-500:]}", status)


def strip_stream_headers(raw: bytes) -> bytes:
    """A non-tty container's logs are multiplexed: 8-byte headers (stream, 0, 0, 0, size) per frame."""
    out, at = bytearray(), 0
    while at + 8 <= len(raw) and raw[at] in (0, 1, 2) and raw[at + 1 : at + 4] == b"\0\0\0":
        size = int.from_bytes(raw[at + 4 : at + 8], "big")
        out += raw[at + 8 : at + 8 + size]
        at += 8 + size
    return bytes(out) if at else raw


def json_lines(text: str) -> list[dict[str, Any]]:
    """A streamed answer (progress messages, one JSON object a line); what is not an object is skipped."""
    messages = []
    for line in text.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            messages.append(message)
    return messages
