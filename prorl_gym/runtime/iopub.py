# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A kernel's IOPub stream, read on a plain zmq socket the event loop wakes.

jupyter_client's asyncio channel costs ~1 CPU-ms per execution here: two futures per message
(a poll, then a recv) and dateutil parsing of every header's dates, which nothing of ours
reads. This reads the same Jupyter wire format with the same HMAC check, parses only the
header, the parent header and the content, and leaves the socket to the event loop between
messages. One reader per kernel, used by one execution at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json

import zmq

DELIMITER = b"<IDS|MSG>"


class IOPubMessage:
    __slots__ = ("msg_type", "parent_id", "content")

    def __init__(self, msg_type: str, parent_id: str | None, content: dict):
        self.msg_type = msg_type
        self.parent_id = parent_id
        self.content = content


class IOPubReader:
    def __init__(self, context: zmq.Context, address: str, key: bytes):
        self._socket = context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._socket.connect(address)
        self._signer = hmac.new(key, digestmod=hashlib.sha256)
        self._loop = asyncio.get_running_loop()
        self._fd = self._socket.getsockopt(zmq.FD)
        self._wake = asyncio.Event()
        # zmq's fd only says "something changed" and stays readable until the socket's events are
        # read: reading them here, as the fd fires, also keeps the loop from waking for nothing.
        self._loop.add_reader(self._fd, self._on_fd)
        self._stopped = False
        self.closed = False

    def _on_fd(self) -> None:
        if self._socket.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            self._wake.set()

    async def get(self, timeout: float) -> IOPubMessage | None:
        """The next message; None once stopped (also while waiting); TimeoutError when none comes in time."""
        async with asyncio.timeout(timeout):
            while not self._stopped:
                self._wake.clear()
                try:
                    parts = self._socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    if not self._socket.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                        await self._wake.wait()
                    continue
                message = self._parse(parts)
                if message is not None:
                    return message
        return None

    def _parse(self, parts: list[bytes]) -> IOPubMessage | None:
        """A message signed with the kernel's key; None for anything else (dropped, as the kernel
        drops unsigned requests)."""
        try:
            signature, header, parent, metadata, content = parts[parts.index(DELIMITER) + 1 :][:5]
        except ValueError:
            return None
        check = self._signer.copy()
        for part in (header, parent, metadata, content):
            check.update(part)
        if not hmac.compare_digest(check.hexdigest().encode(), signature):
            return None
        try:
            return IOPubMessage(json.loads(header)["msg_type"], json.loads(parent).get("msg_id"), json.loads(content))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def stop(self) -> None:
        """get() returns None from now on, at once if it waits: the kernel is gone."""
        self._stopped = True
        self._wake.set()

    def close(self) -> None:
        """Stop, and touch the socket no more (see IPythonKernel.stop_reading). Idempotent."""
        self.stop()
        if not self.closed:
            self.closed = True
            self._loop.remove_reader(self._fd)
            self._socket.close(linger=0)
