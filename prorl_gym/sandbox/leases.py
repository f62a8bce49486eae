# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Leases: a record on disk of every live sandbox, so none can leak.

Each sandbox writes a lease (owner, the host pids of its holder with their start times, its
instance name, private dir, creation time, ttl) into `<root_dir>/.leases/` when created and
removes it when closed. The reaper (reaper.py) ends what a lease describes when its owner is
dead (a `kill -9`ed server) or the lease has expired, and removes the lease. Pids are only
signalled if their start time still matches, so a pid reused by an unrelated process is never
touched.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from prorl_gym.sandbox.layout import private_dir_of
from prorl_gym.sandbox.owner import own_start_time, owner_id, process_alive, process_start_time
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


class Lease(BaseModel):
    sandbox_id: str
    backend: str
    owner: str = Field(default_factory=owner_id)
    owner_pid: int = Field(default_factory=os.getpid)
    owner_start: int | None = Field(default_factory=own_start_time)
    pids: dict[int, int | None] = Field(default_factory=dict)  # host pid -> its start time
    instance: str | None = None  # e.g. an Apptainer instance name
    options: dict[str, Any] = Field(default_factory=dict)  # the backend's options (binary, dirs) to reap with
    private_dir: str
    created: float = Field(default_factory=time.time)
    ttl_s: float | None = None
    # When its owner closed it but could not confirm it gone: any reaper, the owner's too, finishes it.
    abandoned: float | None = None

    @property
    def expired(self) -> bool:
        return self.ttl_s is not None and time.time() > self.created + self.ttl_s

    @property
    def orphaned(self) -> bool:
        return not process_alive(self.owner_pid, self.owner_start)


def lease_dir(root_dir: str | Path) -> Path:
    return Path(root_dir) / ".leases"


def write_lease(root_dir: str | Path, lease: Lease, new: bool = False) -> None:
    """new: the first lease of a sandbox, which must not replace another's (FileExistsError): a
    sandbox id in use elsewhere would lose that sandbox its lease, and with it its reaper."""
    directory = lease_dir(root_dir)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{lease.sandbox_id}.{os.getpid()}.tmp"
    tmp.write_text(lease.model_dump_json())
    target = directory / f"{lease.sandbox_id}.json"
    if not new:
        tmp.rename(target)  # atomic: a reader never sees half a lease
        return
    try:
        os.link(tmp, target)  # atomic too, and fails if the lease exists
    finally:
        tmp.unlink()


def remove_lease(root_dir: str | Path, sandbox_id: str) -> None:
    (lease_dir(root_dir) / f"{sandbox_id}.json").unlink(missing_ok=True)


def abandon_lease(root_dir: str | Path, sandbox_id: str) -> None:
    """Keep the lease of a sandbox that may still run, marked for any reaper (its owner's too)."""
    path = lease_dir(root_dir) / f"{sandbox_id}.json"
    try:
        lease = Lease.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return
    write_lease(root_dir, lease.model_copy(update={"abandoned": time.time()}))


def read_leases(root_dir: str | Path) -> list[Lease]:
    leases = []
    for path in sorted(lease_dir(root_dir).glob("*.json")):
        try:
            leases.append(Lease.model_validate_json(path.read_text()))
        except FileNotFoundError:  # its sandbox closed since the listing
            continue
        except (OSError, ValueError):
            log.warning("unreadable lease %s; removing it", path)
            path.unlink(missing_ok=True)
    return leases


def kill_lease_pids(lease: Lease) -> None:
    for pid, start in lease.pids.items():
        if process_start_time(pid) == start:  # the same process, not a reused pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def lease_for(
    sandbox_id: str,
    spec: SandboxSpec,
    pids: list[int] | None = None,
    instance: str | None = None,
    private_dir: str | Path | None = None,
) -> Lease:
    """A lease describing a sandbox: before placement (owner, private dir), or placed (the host pids
    that hold it, its instance name)."""
    return Lease(
        sandbox_id=sandbox_id,
        backend=spec.backend.kind,
        options=spec.backend.model_dump(mode="json"),
        pids={pid: process_start_time(pid) for pid in pids or ()},
        instance=instance,
        private_dir=str(private_dir if private_dir is not None else private_dir_of(spec.root_dir, sandbox_id)),
        ttl_s=spec.lease_ttl_s,
    )
