# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A resources server's sandbox sessions (resources/sessions.py)."""

from __future__ import annotations

import asyncio

from prorl_gym.resources.sessions import SandboxSessions
from prorl_gym.sandbox.backends.local.backend import LocalBackend
from prorl_gym.sandbox.leases import read_leases, write_lease
from prorl_gym.sandbox.owner import short_hostname
from tests.sandbox.test_leases import foreign_lease


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
