# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real container engine for the container backend's tests, or the reason there is none.

$PRORL_CONTAINER_SOCKET (or DOCKER_HOST=unix://...) names a running engine (Docker, or Podman's
service). Otherwise, as root with `podman` installed (`make container-deps`), a `podman system
service` is started for this test process, with the backend's containers.conf (CONTAINERS_CONF:
the machine's own config is left alone) and stopped at exit. The base image is built once and
kept in the engine's store: later runs find it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from prorl_gym.sandbox.backends.container.engine import Engine, EngineError
from prorl_gym.sandbox.backends.container.image import ensure_base_image

CONTAINERS_CONF = Path(__file__).resolve().parents[2] / "prorl_gym/sandbox/backends/container/containers.conf"
SERVICE_START_S = 20.0


def _start_podman() -> str:
    directory = tempfile.mkdtemp(prefix="prorl-podman-")
    path = f"{directory}/podman.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    log = open(f"{directory}/service.log", "wb")  # noqa: SIM115 - the service's, for its life
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{path}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def stop() -> None:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(10)
        except subprocess.TimeoutExpired:
            service.kill()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    deadline = time.monotonic() + SERVICE_START_S
    while not os.path.exists(path):  # test set-up: the service makes its socket within a second
        if service.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"podman system service did not start: {Path(directory, 'service.log').read_text()}")
        time.sleep(0.05)
    return path


async def _base_image(path: str) -> str:
    engine = Engine(path)
    try:
        await engine.ping()
        return await ensure_base_image(engine)
    finally:
        await engine.close()


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
            return None, None, "podman runs the tests' engine as root only here; or set DOCKER_HOST=unix://<socket>"
        try:
            path = _start_podman()
        except (OSError, RuntimeError) as exc:
            return None, None, f"podman system service: {exc}"
    try:
        with ThreadPoolExecutor(1) as thread:  # its own event loop: callers may be inside one
            image = thread.submit(asyncio.run, _base_image(path)).result()
    except (EngineError, OSError) as exc:
        return None, None, f"the container engine at {path} does not work: {exc}"
    return path, image, ""


def engine_or_skip() -> tuple[str, str]:
    path, image, reason = engine()
    if path is None:
        pytest.skip(reason)
    return path, image
