# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the containment tests: real (bubblewrap) sandboxes under a checked root.

Every test plays the agent: it tries to read or write outside its sandbox, reach the host,
signal host processes or exhaust a resource, then asserts (1) containment, checked from
the host side where possible, (2) a clear result, and (3) that the sandbox is still usable
afterwards (or that the result says it was restarted). A module-scoped autouse fixture,
applied to every test module here, checks at the end of each module that no process of
any sandbox created so far is left and that the module's sandbox root holds nothing.
How processes are attributed to a sandbox: see helpers.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import Sandbox, SandboxSpec, create_sandbox
from prorl_gym.testing import traversable_dir
from tests.security.helpers import _CREATED, LIMITS, _leftovers, _pid_ns, _start_time


@pytest.fixture(scope="module", autouse=True)
def module_root():
    """One sandbox root per test module; at the end of each module no process of any sandbox
    created so far (this module's or an earlier one's) and no directory of ours is left."""
    root = str(traversable_dir("prorl-sec-"))
    yield root
    deadline = time.monotonic() + 10
    while (left := _leftovers(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    # .leases/ and .etc-*/ are the root's shared directories: they may stay, but no lease of ours may.
    entries = sorted(name for name in os.listdir(root) if name != ".leases" and not name.startswith(".etc-"))
    leases = Path(root) / ".leases"
    entries += [f".leases/{path.name}" for path in sorted(leases.iterdir())] if leases.is_dir() else []
    for pid in left:  # ours: clean up so a failure here does not leak into other tests
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"processes of this module's sandboxes survived: {left}"
    assert not entries, f"left under the sandbox root {root}: {entries}"


@pytest.fixture
async def make(module_root):
    """make(**spec_overrides) -> a started sandbox under the module root, closed after the test."""
    made: list[Sandbox] = []

    async def _make(**overrides) -> Sandbox:
        fields = dict(
            root_dir=module_root,
            limits=LIMITS,
            command_timeout_s=10,
            python_timeout_s=20,
            start_timeout_s=20,
        )
        fields.update(overrides)
        sb = await create_sandbox(SandboxSpec(**fields))
        made.append(sb)
        init_pid = sb.placement.init_pid
        ns = _pid_ns(init_pid)
        assert ns is not None, "sandbox pid 1 not visible from the host"
        _CREATED.append({"id": sb.id, "init_pid": init_pid, "init_start": _start_time(init_pid), "ns": ns})
        return sb

    yield _make
    await asyncio.gather(*(sb.close() for sb in made), return_exceptions=True)
