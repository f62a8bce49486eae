# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: sandboxes under a per-test root directory."""

from __future__ import annotations

import os

import pytest

from prorl_gym.runtime.shell import PtyShell
from prorl_gym.sandbox import SandboxSpec, create_sandbox


@pytest.fixture
def sandbox_spec(sandbox_root) -> SandboxSpec:
    return SandboxSpec(root_dir=sandbox_root, command_timeout_s=10, python_timeout_s=20)


@pytest.fixture
async def sandbox(sandbox_spec):
    sb = await create_sandbox(sandbox_spec)
    try:
        yield sb
    finally:
        await sb.close()


@pytest.fixture
async def shell(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "TERM": "dumb"}
    sh = PtyShell(["bash", "--noprofile", "--norc", "--noediting", "-i"], env, cwd=str(tmp_path), output_limit=4096)
    await sh.start()
    try:
        yield sh
    finally:
        await sh.close()
