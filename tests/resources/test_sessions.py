# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A resources server's sandbox sessions (resources/sessions.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prorl_gym.resources.sessions import SandboxSessions
from prorl_gym.sandbox.backends.local.backend import LocalBackend
from prorl_gym.sandbox.leases import read_leases, write_lease
from prorl_gym.sandbox.owner import short_hostname
from prorl_gym.testing import sandbox_dirs_left
from tests.sandbox.test_leases import foreign_lease
from tests.support.cancelled import cancelled_midway, hold


async def test_a_predecessors_sandboxes_are_reaped_while_the_new_server_already_serves(sandbox_spec, monkeypatch):
    # A server SIGKILLed with hundreds of sandboxes: reaping them took minutes on a busy machine,
    # and the server that came back answered nothing meanwhile.
    write_lease(sandbox_spec.root_dir, foreign_lease(sandbox_spec, "left", f"{short_hostname()}-1-0", expired=True))
    reaping, go_on = asyncio.Event(), asyncio.Event()
    reap = LocalBackend.reap

    async def slow_reap(self, lease):
        reaping.set()
        await go_on.wait()
        return await reap(self, lease)

    monkeypatch.setattr(LocalBackend, "reap", slow_reap)
    sessions = SandboxSessions(sandbox_spec)
    await asyncio.wait_for(sessions.start(), 30)
    try:
        await asyncio.wait_for(reaping.wait(), 30)
        sandbox = await sessions.create("s1")  # served while the reaper is still at work
        assert (await sandbox.bash("echo up")).output == "up\n"
        go_on.set()
        for _ in range(300):
            if [lease.sandbox_id for lease in read_leases(sandbox_spec.root_dir)] == [sandbox.id]:
                break
            await asyncio.sleep(0.1)
        assert [lease.sandbox_id for lease in read_leases(sandbox_spec.root_dir)] == [sandbox.id]
    finally:
        go_on.set()
        await sessions.close()


async def test_a_release_whose_request_is_cancelled_midway_still_closes_the_sandbox(sandbox_spec, monkeypatch):
    sessions = SandboxSessions(sandbox_spec)
    await sessions.start()
    try:
        sandbox = await sessions.create("s1")
        closing = hold(monkeypatch, type(sandbox), "close")
        await cancelled_midway(lambda: sessions.release("s1"), closing.reached)
        closing.go_on.set()
    finally:
        await sessions.close()  # waits for the closes that their requests did not see end
    assert sandbox_dirs_left(Path(sandbox_spec.root_dir)) == []


async def test_a_sandbox_whose_seed_is_cancelled_midway_is_started_then_closed(sandbox_spec, monkeypatch):
    sessions = SandboxSessions(sandbox_spec)
    await sessions.start()
    starting = hold(monkeypatch, SandboxSessions, "_new")
    try:
        await cancelled_midway(lambda: sessions.create("s1"), starting.reached)
        starting.go_on.set()
        for _ in range(300):  # the start runs to its end; then nobody is left to release it but us
            if starting.results and not sandbox_dirs_left(Path(sandbox_spec.root_dir)):
                break
            await asyncio.sleep(0.1)
        assert len(starting.results) == 1 and sessions.find("s1") is None
        assert sandbox_dirs_left(Path(sandbox_spec.root_dir)) == []
    finally:
        await sessions.close()
