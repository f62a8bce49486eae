"""Fixtures shared by every test folder (tests/, resources_servers/*/tests, responses_api_*/*/tests)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from fastapi.testclient import TestClient

from prorl_gym.testing import build_server


@pytest.fixture
def sandbox_root():
    """A per-test sandbox root the unprivileged sandbox uid can reach (pytest's tmp dirs are 0700)."""
    root = tempfile.mkdtemp(prefix="prorl-test-", dir="/tmp")
    os.chmod(root, 0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def serve(sandbox_root):
    """serve(ServerClass, name, **config) -> a TestClient on the server's app, lifespan running.

    Sandboxes of the server live under the test's sandbox_root.
    """
    clients = []

    def _serve(server_cls, name, **config):
        if "sandbox" in server_cls.model_fields["config"].annotation.model_fields:
            config.setdefault("sandbox", {})
            config["sandbox"].setdefault("root_dir", sandbox_root)
        server = build_server(server_cls, name, **config)
        client = TestClient(server.setup_webserver())
        client.__enter__()
        clients.append(client)
        return client

    yield _serve
    for client in clients:
        client.__exit__(None, None, None)
