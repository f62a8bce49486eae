# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The reaper: ends what leases (leases.py) describe of sandboxes nobody will close.

A sandbox is reaped when its owner is dead (a `kill -9`ed server), its lease has expired, or its
owner closed it without being able to confirm it gone (abandoned). Resources servers reap their
sandbox root at start and periodically, Ray sandbox hosts theirs (so a restart after `kill -9`
cleans up after its predecessor). Each lease is ended by the backend that wrote it.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

from prorl_gym.sandbox.backends.base import PlacementBackend
from prorl_gym.sandbox.backends.instances import Backends, default_backends
from prorl_gym.sandbox.leases import read_leases, remove_lease
from prorl_gym.sandbox.owner import owned_here, owner_id

log = logging.getLogger(__name__)


async def reap_stale(root_dir: str | Path, backends: Backends | None = None) -> list[str]:
    """End sandboxes whose owner is dead, whose lease expired or that were abandoned; returns
    their ids. A lease stays while its backend cannot confirm the sandbox gone.

    Our own live sandboxes are never touched (their idle sweep is in-process).
    backends: whose instances end them (default: the process's default_backends()).
    """
    backends = backends if backends is not None else default_backends()
    me = owner_id()
    reaped = []
    for lease in await asyncio.to_thread(read_leases, root_dir):
        if not owned_here(lease.owner):  # another node's: its pids mean nothing here
            continue
        if lease.abandoned is None and (lease.owner == me or not (lease.orphaned or lease.expired)):
            continue
        if lease.abandoned is not None:
            reason = "abandoned by its owner"
        else:
            reason = "expired" if lease.expired else f"its owner {lease.owner} is gone"
        log.warning("reaping sandbox %s (%s)", lease.sandbox_id, reason)
        backend = backends.get(lease.backend)
        if not isinstance(backend, PlacementBackend):  # leases are written by backends that place sandboxes here
            log.warning("lease %s names backend %r, which places no sandboxes here", lease.sandbox_id, lease.backend)
            continue
        if not await backend.reap(lease):
            continue
        await asyncio.to_thread(shutil.rmtree, lease.private_dir, True)
        await asyncio.to_thread(remove_lease, root_dir, lease.sandbox_id)
        reaped.append(lease.sandbox_id)
    return reaped
