# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One STEM server per test module: starting it (verifier worker, BM25 index) costs seconds,
and every test seeds its own session, so tests do not share state through it."""

from __future__ import annotations

import pytest

from resources_servers.stem.app import StemResourcesServer


@pytest.fixture(scope="module")
def client(serve_once):
    return serve_once(StemResourcesServer, "stem", verifier_workers=1, domain="knowledge")
