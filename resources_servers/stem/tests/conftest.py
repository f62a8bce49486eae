"""One STEM server per test module: starting it (verifier worker, BM25 index) costs seconds,
and every test seeds its own session, so tests do not share state through it."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from fastapi.testclient import TestClient

from prorl_gym.testing import build_server
from resources_servers.stem.app import StemResourcesServer


@pytest.fixture(scope="module")
def client():
    root = tempfile.mkdtemp(prefix="prorl-test-", dir="/tmp")  # reachable by the sandbox uid
    os.chmod(root, 0o711)
    server = build_server(StemResourcesServer, "stem", verifier_workers=1, domain="knowledge", sandbox={"root_dir": root})
    with TestClient(server.setup_webserver()) as test_client:
        yield test_client
    assert not [p for p in os.listdir(root) if not p.startswith(".")], "sandbox directories left behind"
    shutil.rmtree(root, ignore_errors=True)
