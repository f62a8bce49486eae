# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by every test folder (tests/, resources_servers/*/tests, responses_api_*/*/tests)."""

from __future__ import annotations

import os
import shutil

import pytest
from fastapi.testclient import TestClient

from prorl_gym.stack import lean_ray_cluster
from prorl_gym.testing import build_server, traversable_dir
from tests.tiers import SLOW, in_slow_tier


@pytest.fixture
def sandbox_root():
    """A per-test sandbox root the unprivileged sandbox uid can reach (pytest's tmp dirs are 0700)."""
    root = _traversable_root()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _server_factory(make_root):
    """serve(ServerClass, name, **config) -> a TestClient on the server's app, lifespan running;
    its sandboxes live under a root the sandbox uid can reach. Yields the factory, then
    closes every server and checks that no sandbox directory was left behind."""
    clients, roots = [], []

    def _serve(server_cls, name, **config):
        if "sandbox" in server_cls.model_fields["config"].annotation.model_fields:
            config.setdefault("sandbox", {})
            if "root_dir" not in config["sandbox"]:
                roots.append(make_root())
                config["sandbox"]["root_dir"] = roots[-1]
        client = TestClient(build_server(server_cls, name, **config).setup_webserver())
        client.__enter__()
        clients.append(client)
        return client

    yield _serve
    for client in clients:
        client.__exit__(None, None, None)
    for root in roots:
        left = [p for p in os.listdir(root) if not p.startswith(".")]
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"sandbox directories left behind: {left}"


def _traversable_root() -> str:
    return str(traversable_dir())


@pytest.fixture
def serve():
    """A server per test (see _server_factory)."""
    yield from _server_factory(_traversable_root)


@pytest.fixture(scope="module")
def serve_once():
    """A server per test module: starting one (verifier workers, kernel zygote, indexes)
    costs seconds; tests seed their own sessions, so they share no state through it."""
    yield from _server_factory(_traversable_root)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """One lean Ray cluster that every stack of the session joins in turn (Stack(ray=...)): a stack's own costs
    ~10 CPU-seconds to start and stop, and the stacks run one after the other."""
    with lean_ray_cluster(tmp_path_factory.mktemp("ray") / "logs") as cluster:
        yield cluster


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark the slow tier (tests/tiers.py); `make test` runs `-m "not slow"`, `make test-slow` `-m slow`."""
    matched = set()
    for item in items:
        entries = [entry for entry in SLOW if in_slow_tier(item.nodeid, entry)]
        if entries:
            item.add_marker(pytest.mark.slow)
            matched.update(entries)
    whole_suite = not config.args or sorted(config.args) == sorted(config.getini("testpaths"))
    stale = sorted(set(SLOW) - matched)
    if whole_suite and stale:
        raise pytest.UsageError(f"tests/tiers.py lists tests that were not collected: {stale}")
