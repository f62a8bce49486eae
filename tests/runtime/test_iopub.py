# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""IOPubReader: the Jupyter wire format on a plain socket, woken by the event loop."""

import asyncio

import pytest
import zmq
from jupyter_client.session import Session

from prorl_gym.runtime.iopub import IOPubReader
from prorl_gym.sandbox import Sandbox, create_sandbox

KEY = b"0123456789abcdef"


@pytest.fixture
async def publisher(tmp_path):
    context = zmq.Context()
    pub = context.socket(zmq.PUB)
    address = f"ipc://{tmp_path}/iopub"
    pub.bind(address)
    reader = IOPubReader(context, address, KEY)
    try:
        yield pub, reader
    finally:
        reader.close()
        pub.close(linger=0)
        context.term()


async def _until_subscribed(pub, reader, session):
    """A subscriber that connected late misses what was published before it: ping until one arrives."""
    while True:
        session.send(pub, "status", {"execution_state": "starting"})
        try:
            if await reader.get(0.05):
                return
        except TimeoutError:
            continue


async def test_only_messages_signed_with_the_kernels_key_are_read(publisher):
    pub, reader = publisher
    session = Session(key=KEY)
    await _until_subscribed(pub, reader, session)
    forged = Session(key=b"not the key")
    forged.send(pub, "stream", {"name": "stdout", "text": "forged\n"})
    pub.send_multipart([b"no delimiter", b"{}"])
    pub.send_multipart([b"<IDS|MSG>", b"sig", b"not json"])
    parent = session.msg("execute_request", {"code": "1"})
    session.send(pub, "stream", {"name": "stdout", "text": "real\n"}, parent=parent)
    message = await reader.get(5)
    assert (message.msg_type, message.parent_id, message.content["text"]) == ("stream", parent["msg_id"], "real\n")
    with pytest.raises(TimeoutError):
        await reader.get(0.1)


async def test_stop_ends_a_waiting_read_and_every_later_one(publisher):
    _pub, reader = publisher
    waiting = asyncio.create_task(reader.get(30))
    await asyncio.sleep(0.05)
    reader.stop()
    assert await waiting is None and await reader.get(30) is None


@pytest.fixture
async def ipython_sandbox(sandbox_spec):
    sb = await create_sandbox(sandbox_spec.model_copy(update={"python_runtime": "ipython"}))
    try:
        yield sb
    finally:
        await sb.close()


async def test_output_nobody_waits_for_does_not_keep_the_loop_busy(ipython_sandbox: Sandbox, monkeypatch):
    """zmq's fd stays readable until the socket's events are read: a reader that only woke a
    waiter would have the loop call it on every turn while output queues up unread."""
    sandbox = ipython_sandbox
    late = (
        "import threading, time\n"
        "def talk():\n"
        "    time.sleep(0.2)\n"
        "    for i in range(200): print(i, flush=True)\n"
        "threading.Thread(target=talk).start()"
    )
    await sandbox.python(late)  # returns at once; the thread prints while no execution reads
    reader = sandbox._kernel._iopub
    with pytest.raises(TimeoutError):  # found nothing: zmq now signals the next message on its fd
        await reader.get(0.05)
    calls = []
    original = reader._on_fd
    monkeypatch.setattr(reader, "_on_fd", lambda: (calls.append(1), original()))
    asyncio.get_running_loop().remove_reader(reader._fd)
    asyncio.get_running_loop().add_reader(reader._fd, reader._on_fd)
    await asyncio.sleep(1.0)
    assert 0 < len(calls) < 100, len(calls)  # woken by the output, not spun by it
    assert (await sandbox.python("print('next')")).output == "next\n"  # the late output is not this call's
