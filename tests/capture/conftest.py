# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One capture stack for every test of this folder that asks for it (tests/support/capture_servers.py)."""

from __future__ import annotations

import pytest_asyncio

from tests.support.capture_servers import capture_stack


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def stack(tmp_path_factory):
    """(gateway, its URL, the policy)."""
    async with capture_stack(tmp_path_factory.mktemp("capture")) as served:
        yield served
