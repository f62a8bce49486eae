# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The tool-call stream between a server and a sandbox host: the hot path without Ray.

Ray places hosts and runs their lifecycle (create, close, fork, health); a tool call on a
remote sandbox (bash, python, files) goes over one TCP connection per server and host
instead of an actor call each (an actor call costs ~1-3 ms here; a framed request on an open
socket a fraction of one). The host listens on its node's address; a client proves itself with
the host's token (handed out over Ray by the host's start()) before anything else is read.
Requests and replies are JSON only (never pickle: the port is reachable from the cluster's
network): a result model or a string or bytes, or an error named by its class, re-raised here
when it is one of this package's own, as a Ray call would.

Frames: 4-byte big-endian length, then a JSON object.
    client -> host: {"token": ...} once, then {"id", "method", "sandbox_id", "args"} or {"cancel": id}
    host -> client: {"id", "result"} or {"id", "error": {"type": "module:Class", "message"}}
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import importlib
import json
import logging
import secrets
import struct
from typing import Any

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.sandbox.errors import SandboxError, SandboxLostError

log = logging.getLogger(__name__)
HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30  # a file read back whole (read_bytes) is the largest
TOKEN_WAIT_S = 5.0
STREAMED = frozenset({"bash", "python", "read_file", "read_bytes", "write_file", "edit_file"})
MODELS = {"shell": ShellResult, "python": PythonResult}


class StreamBroken(SandboxLostError):
    """The connection to the host ended with this call in flight: its outcome is unknown."""


# ---------------------------------------------------------------------- values on the wire


def encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    for kind, model in MODELS.items():
        if isinstance(value, model):
            return {kind: value.model_dump(mode="json")}
    return value  # str, int, float, None: JSON as they are


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "bytes" in value:
            return base64.b64decode(value["bytes"])
        for kind, model in MODELS.items():
            if kind in value:
                return model.model_validate(value[kind])
        raise ValueError(f"not a value of the tool stream: {sorted(value)}")
    return value


def error_of(exc: BaseException) -> dict[str, str]:
    return {"type": f"{type(exc).__module__}:{type(exc).__qualname__}", "message": str(exc)}


def raise_error(error: dict[str, str]) -> None:
    """Raise the host's error as itself when it is one of ours (a SandboxError, a file error), else as
    a SandboxError that names it."""
    module, _, name = str(error.get("type", "")).partition(":")
    message = str(error.get("message", ""))
    cls = None
    if module.startswith("prorl_gym."):
        with contextlib.suppress(ImportError, AttributeError):
            cls = getattr(importlib.import_module(module), name)
    if isinstance(cls, type) and issubclass(cls, ProrlError):
        raise cls(message)
    raise SandboxError(f"{error.get('type')}: {message}")


async def _read_frame(reader: asyncio.StreamReader) -> dict:
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    message = json.loads(await reader.readexactly(size))
    if not isinstance(message, dict):
        raise ValueError("a frame that is not a JSON object")
    return message


def _frame(message: dict) -> bytes:
    payload = json.dumps(message).encode()
    return HEADER.pack(len(payload)) + payload


# ---------------------------------------------------------------------- host side


class ToolStreamServer:
    """Serves STREAMED calls of a host (host.py's SandboxHost: `await host.<method>(sandbox_id, *args)`)."""

    def __init__(self, host: Any):
        self._host = host
        self.token = secrets.token_hex(32)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self, bind: str) -> dict[str, Any]:
        """Listen on `bind` (the node's address); what a client needs to connect."""
        self._server = await asyncio.start_server(self._serve, bind, 0)
        port = self._server.sockets[0].getsockname()[1]
        return {"address": [bind, port], "token": self.token}

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        calls: dict[int, asyncio.Task] = {}
        try:
            hello = await asyncio.wait_for(_read_frame(reader), TOKEN_WAIT_S)
            if not hmac.compare_digest(str(hello.get("token", "")).encode(), self.token.encode()):
                return
            while True:
                request = await _read_frame(reader)
                if "cancel" in request:
                    if (call := calls.get(request["cancel"])) is not None:
                        call.cancel()
                    continue
                call_id = request.get("id")
                calls[call_id] = asyncio.create_task(self._call(request, writer))
                calls[call_id].add_done_callback(lambda _, i=call_id: calls.pop(i, None))
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError):
            pass  # the client went away, or is not one
        finally:
            for call in calls.values():
                call.cancel()
            self._connections.discard(task)
            writer.close()

    async def _call(self, request: dict, writer: asyncio.StreamWriter) -> None:
        call_id, method = request.get("id"), request.get("method")
        try:
            if method not in STREAMED:
                raise SandboxError(f"not a streamed call: {method!r}")
            args = [decode(arg) for arg in request.get("args", [])]
            result = await getattr(self._host, method)(str(request.get("sandbox_id")), *args)
            reply = {"id": call_id, "result": encode(result)}
        except asyncio.CancelledError:
            return  # the client cancelled it: it expects no reply
        except Exception as exc:  # noqa: BLE001 - the call's error, for the client to raise
            reply = {"id": call_id, "error": error_of(exc)}
        with contextlib.suppress(ConnectionError, RuntimeError):
            writer.write(_frame(reply))


# ---------------------------------------------------------------------- client side


class ToolStream:
    """One server's connection to one host, shared by all its calls there (multiplexed by id)."""

    def __init__(self, address: tuple[str, int], token: str, name: str):
        self._address = address
        self._token = token
        self._name = name
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._next_id = 0

    async def call(self, method: str, sandbox_id: str, *args: Any) -> Any:
        writer = await self._connected()
        self._next_id += 1
        call_id = self._next_id
        reply = self._pending[call_id] = asyncio.get_running_loop().create_future()
        try:
            writer.write(
                _frame({"id": call_id, "method": method, "sandbox_id": sandbox_id, "args": list(map(encode, args))})
            )
            message = await reply
        except asyncio.CancelledError:
            if self._writer is writer and not writer.is_closing():
                writer.write(_frame({"cancel": call_id}))
            raise
        finally:
            self._pending.pop(call_id, None)
        if "error" in message:
            raise_error(message["error"])
        return decode(message.get("result"))

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is None or self._writer.is_closing():
                try:
                    reader, writer = await asyncio.open_connection(*self._address)
                except OSError as exc:
                    raise StreamBroken(f"sandbox host {self._name}: no tool stream: {exc}") from exc
                writer.write(_frame({"token": self._token}))
                self._writer = writer
                self._reader_task = asyncio.create_task(self._read(reader, writer), name=f"tool stream {self._name}")
            return self._writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        why = "closed by the host"
        try:
            while True:
                message = await _read_frame(reader)
                waiter = self._pending.get(message.get("id"))
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, asyncio.IncompleteReadError) else why
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            broken = StreamBroken(f"sandbox host {self._name}: the tool stream ended ({why})")
            for waiter in list(self._pending.values()):
                if not waiter.done():
                    waiter.set_exception(broken)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            await asyncio.gather(self._reader_task, return_exceptions=True)
