"""Fixtures shared by every test folder (tests/, resources_servers/*/tests, responses_api_*/*/tests)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from prorl_gym.testing import build_server


@pytest.fixture
def serve(tmp_path):
    """serve(ServerClass, name, **config) -> a TestClient on the server's app, lifespan running.

    Sandboxes of the server live under the test's tmp_path.
    """
    clients = []

    def _serve(server_cls, name, **config):
        if "sandbox" in server_cls.model_fields["config"].annotation.model_fields:
            config.setdefault("sandbox", {})
            config["sandbox"].setdefault("root_dir", str(tmp_path / "sbx"))
        server = build_server(server_cls, name, **config)
        client = TestClient(server.setup_webserver())
        client.__enter__()
        clients.append(client)
        return client

    yield _serve
    for client in clients:
        client.__exit__(None, None, None)
