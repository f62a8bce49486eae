# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A handler whose client went away before its answer is cancelled (prorl_gym/disconnect.py), driven
through the ASGI protocol itself; on a real stack: tests/test_stragglers.py (a replaced straggler's
generation counted aborted at the policy)."""

from __future__ import annotations

import asyncio

import pytest

from prorl_gym.disconnect import CancelOnDisconnect


class Handler:
    """An ASGI app that reads its body, then generates until `release` is set, then answers (streaming: its
    headers first)."""

    def __init__(self, streaming: bool = False) -> None:
        self.streaming = streaming
        self.release = asyncio.Event()
        self.generating = asyncio.Event()
        self.outcome: str | None = None

    async def __call__(self, scope, receive, send) -> None:
        while (await receive()).get("more_body"):
            pass
        if self.streaming:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        self.generating.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise
        if not self.streaming:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})
        self.outcome = "answered"


def client(path: str = "/v1/responses"):
    """An ASGI scope, a receive that hands the body in two parts and then waits for the test's disconnect, a send
    that records."""
    inbox: asyncio.Queue = asyncio.Queue()
    for message in ({"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.request", "body": b"}"}):
        inbox.put_nowait(message)
    sent: list[dict] = []

    async def send(message) -> None:
        sent.append(message)

    return {"type": "http", "path": path}, inbox, send, sent


async def test_a_client_gone_before_the_answer_cancels_its_handler_and_is_counted():
    handler, aborted = Handler(), []
    app = CancelOnDisconnect(handler, paths=("/v1/responses",), on_abort=aborted.append)
    scope, inbox, send, sent = client()
    request = asyncio.create_task(app(scope, inbox.get, send))
    await handler.generating.wait()
    inbox.put_nowait({"type": "http.disconnect"})
    done, _ = await asyncio.wait({request}, timeout=5)  # not wait_for: its own cancel would look like the middleware's
    assert done and request.result() is None  # ends quietly: the cancel was the middleware's own
    assert handler.outcome == "cancelled" and aborted == ["/v1/responses"] and sent == []


@pytest.mark.parametrize(
    ("path", "streaming"),
    [("/health", False), ("/v1/responses", True)],  # not a generation route; an answer already under way
)
async def test_another_path_or_an_answer_started_is_not_cancelled(path, streaming):
    handler, aborted = Handler(streaming), []
    app = CancelOnDisconnect(handler, paths=("/v1/responses",), on_abort=aborted.append)
    scope, inbox, send, sent = client(path)
    request = asyncio.create_task(app(scope, inbox.get, send))
    await handler.generating.wait()
    inbox.put_nowait({"type": "http.disconnect"})
    await asyncio.sleep(0.05)  # the disconnect read (a wrong cancel would land here)
    handler.release.set()
    await asyncio.wait_for(request, 5)
    assert handler.outcome == "answered" and aborted == [] and sent[-1]["body"] == b"done"


async def test_a_cancel_from_elsewhere_still_propagates():
    handler = Handler()
    app = CancelOnDisconnect(handler, paths=("/v1/responses",))
    scope, inbox, send, _ = client()
    request = asyncio.create_task(app(scope, inbox.get, send))
    await handler.generating.wait()
    request.cancel()  # e.g. the server shutting down: not a disconnect, not swallowed
    with pytest.raises(asyncio.CancelledError):
        await request
    assert handler.outcome == "cancelled"
