# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real container engine for the container backend's tests, or the reason there is none.

$PRORL_CONTAINER_SOCKET (or DOCKER_HOST=unix://...) names a running engine (Docker, or Podman's
service). Otherwise, as root with `podman` installed (`make container-deps`), a private `podman
system service` (PodmanService: the backend's containers.conf, the machine's config left alone)
serves this test process and is stopped at exit. The base image is built once and kept in the
engine's store: later runs find it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest

from prorl_gym.sandbox.backends.container.engine import Engine, EngineError
from prorl_gym.sandbox.backends.container.image import ensure_base_image
from prorl_gym.sandbox.backends.container.podman_service import PodmanService


async def _start_podman() -> str:
    service = PodmanService()
    path = await service.start()

    def stop() -> None:  # at exit, with no event loop to run close() on
        os.killpg(service.pid, signal.SIGTERM)
        os.waitpid(service.pid, 0)
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    atexit.register(stop)
    return path


async def _base_image(path: str) -> str:
    engine = Engine(path)
    try:
        await engine.ping()
        return await ensure_base_image(engine)
    finally:
        await engine.close()


def _run(coroutine):
    with ThreadPoolExecutor(1) as thread:  # an event loop of its own: callers may be inside one
        return thread.submit(asyncio.run, coroutine).result()


@cache
def engine() -> tuple[str | None, str | None, str]:
    """(socket, base image, why not): the socket and image of a working engine, or None and the reason."""
    path = os.environ.get("PRORL_CONTAINER_SOCKET") or os.environ.get("DOCKER_HOST", "").removeprefix("unix://")
    if not path:
        if shutil.which("podman") is None:
            return (
                None,
                None,
                "no container engine: run `make container-deps` (root, apt: podman, runc) or set DOCKER_HOST",
            )
        if os.geteuid() != 0:
            return None, None, "the tests run podman as root only; or set DOCKER_HOST=unix://<an engine's socket>"
        try:
            path = _run(_start_podman())
        except (OSError, EngineError) as exc:
            return None, None, f"podman system service: {exc}"
    try:
        image = _run(_base_image(path))
    except (EngineError, OSError) as exc:
        return None, None, f"the container engine at {path} does not work: {exc}"
    return path, image, ""


def engine_or_skip() -> tuple[str, str]:
    path, image, reason = engine()
    if path is None:
        pytest.skip(reason)
    return path, image
