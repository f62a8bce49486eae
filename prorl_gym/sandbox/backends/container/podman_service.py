# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A private `podman system service`: the Docker Engine API for the container backend where there
is Podman but no Docker daemon (tests, benchmarks, a workstation without one).

Socket-activated: we bind and listen on the socket, then hand it to Podman as fd 3 (LISTEN_FDS),
so it takes calls the moment it starts and nothing waits for a socket file to appear. It reads
the backend's containers.conf (CONTAINERS_CONF: the machine's own config is left alone):

    async with PodmanService() as socket_path:
        spec = SandboxSpec(backend={"kind": "container", "socket": socket_path})
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

from prorl_gym.runtime.process import reap, signal_group
from prorl_gym.sandbox.backends.container.engine import EngineError

CONTAINERS_CONF = Path(__file__).with_name("containers.conf")
LISTEN_FD = 3  # sd_listen_fds: the first passed socket
STOP_GRACE_S = 10.0


class PodmanService:
    def __init__(self, binary: str = "podman", containers_conf: Path | None = CONTAINERS_CONF):
        self.binary = binary
        self.containers_conf = containers_conf  # None: Podman's own (the machine's) config
        self.socket_path: str | None = None
        self.pid = -1
        self._directory: str | None = None

    async def start(self) -> str:
        """Start it; the path of its socket (answering at once)."""
        binary = shutil.which(self.binary)
        if binary is None:
            raise EngineError(f"{self.binary!r} not found: install podman and runc (`make container-deps`)")
        self._directory = tempfile.mkdtemp(prefix="prorl-podman-")
        self.socket_path = f"{self._directory}/podman.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.socket_path)
            listener.listen(128)
            env = {**os.environ, "LISTEN_FDS": "1"}
            if self.containers_conf is not None:
                env["CONTAINERS_CONF"] = str(self.containers_conf)
            log = os.open(f"{self._directory}/service.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                # LISTEN_PID must be the service's own pid: a shell sets it to its own, then execs podman.
                argv = ["sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", binary, "system", "service", "--time=0"]
                self.pid = os.posix_spawn(
                    "/bin/sh",
                    argv,
                    env,
                    file_actions=[
                        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                        (os.POSIX_SPAWN_DUP2, log, 1),
                        (os.POSIX_SPAWN_DUP2, log, 2),
                        (os.POSIX_SPAWN_DUP2, listener.fileno(), LISTEN_FD),
                    ],
                    setsid=True,
                )
            finally:
                os.close(log)
        except BaseException:
            await self.close()
            raise
        finally:
            listener.close()  # the service holds it now
        return self.socket_path

    def log(self) -> str:
        try:
            return Path(self._directory or "", "service.log").read_text()[-2000:]
        except OSError:
            return ""

    async def close(self) -> None:
        """Stop it (its containers keep running: they are the sandboxes', removed by their owners)."""
        if self.pid > 0:
            signal_group(self.pid, signal.SIGTERM)
            if await reap(self.pid, STOP_GRACE_S) is None:  # still running
                signal_group(self.pid, signal.SIGKILL)
                await reap(self.pid)
            self.pid = -1
        if self._directory is not None:
            await asyncio.to_thread(shutil.rmtree, self._directory, True)
            self._directory = None

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()
