# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""An agent harness run inside a rollout's sandbox (POST /harness), acting on the workspace directly.

Its program comes from a prepared environment (.venvs/harnesses/<name>, built by make setup from
the harness's requirements.txt or package.json) bound read-only into every sandbox of a server that lists it in
`harness_envs`. Its model calls go to http://127.0.0.1:<port>/v1 on the sandbox's own loopback,
where loopback_forward.py pipes them into a Unix socket bound into the sandbox (its directory the
sandbox reads at the same path as the host). This module serves that socket on the host: the only
way out of the sandbox. It passes a POST to the OpenAI-compatible paths below, to the rollout's
capture endpoint and nowhere else; any other path or method is a 404 or 405, so a harness (or the
policy's commands, which share its sandbox) can reach no other route, rollout or host.
"""

from __future__ import annotations

import asyncio
import os
import random
import shlex
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

import aiohttp
from aiohttp import web

from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import SandboxAPI
from prorl_gym.sandbox.backends.inside import python_dirs
from prorl_gym.sandbox.spec import Bind
from prorl_gym.wire.resources import MODEL_PATHS, HarnessRunRequest, HarnessRunResponse

HARNESS_ENVS_DIR = REPO_ROOT / ".venvs" / "harnesses"
MAX_BODY_BYTES = 64 << 20
FORWARDER = Path(__file__).with_name("loopback_forward.py")


class UnknownHarnessEnv(ValueError):
    """A harness environment the server does not bind into its sandboxes."""


@runtime_checkable
class SharesSocketDir(Protocol):
    """A sandbox on the server's machine with a directory the server writes and the sandbox's processes
    read, at the same path inside and out (its kernel's sockets live there): a harness's model socket
    can be bound there. A sandbox on another host (Ray) has none."""

    socket_dir: Path


def harness_env_dir(name: str) -> Path:
    return HARNESS_ENVS_DIR / name


def harness_env_binds(names: list[str]) -> list[Bind]:
    """Read-only binds of the named prepared environments and the interpreters they run on (copies of a
    task's hidden packages in them are hidden too: the policy shares the harness's sandbox)."""
    binds: list[Bind] = []
    for name in names:
        directory = harness_env_dir(name)
        if not (directory / ".prorl-installed").exists():
            raise UnknownHarnessEnv(
                f"harness environment {name!r} is not built ({directory}): `make setup` builds one per "
                "responses_api_agents/prorl_agent/harnesses/<name>/ (requirements.txt or package.json)"
            )
        python = directory / "bin" / "python"  # a Python environment runs on an interpreter outside it
        binds += [Bind(src=path) for path in [str(directory), *(python_dirs(str(python)) if python.exists() else [])]]
    return list({b.src: b for b in binds}.values())


class ModelSocket:
    """The host side of a sandbox's model socket: a POST to /v1/<one of MODEL_PATHS> is passed on to
    `base_url` (the rollout's capture endpoint) as it came; nothing else is."""

    def __init__(self, path: Path, base_url: str, timeout_s: float):
        self.path, self.base_url, self.timeout_s = path, base_url.rstrip("/"), timeout_s
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/{tail:.*}", self._forward)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self.path.unlink(missing_ok=True)
        await web.UnixSite(self._runner, str(self.path)).start()
        os.chmod(self.path, 0o666)  # the sandbox's user may be another uid: connecting takes write access

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        self.path.unlink(missing_ok=True)

    async def __aenter__(self) -> ModelSocket:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _forward(self, request: web.Request) -> web.Response:
        tail = request.match_info["tail"]
        if tail not in MODEL_PATHS:
            raise web.HTTPNotFound(text=f"only POST /v1/{{{','.join(sorted(MODEL_PATHS))}}} is served here")
        body = await request.read()
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        try:
            async with self._session.post(f"{self.base_url}/{tail}", data=body, headers=headers) as upstream:
                payload = await upstream.read()
                content_type = upstream.headers.get("Content-Type", "application/json")
                return web.Response(body=payload, status=upstream.status, headers={"Content-Type": content_type})
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.json_response(
                {"error": {"type": "capture_unreachable", "message": f"the capture endpoint failed: {exc!r}"}},
                status=502,
            )


async def run_harness(sandbox: SandboxAPI, request: HarnessRunRequest) -> HarnessRunResponse:
    """Run the harness's command in the sandbox with its model socket open; the socket is closed when
    the command ends (also on a timeout or a cancellation), so nothing it left running can call on."""
    if not isinstance(sandbox, SharesSocketDir):
        raise NotImplementedError(
            f"a harness runs inside sandboxes on the resources server's machine; {type(sandbox).__name__} "
            "is not (place the harness in the agent: harness.placement: agent)"
        )
    socket_dir, env_dir = Path(sandbox.socket_dir), harness_env_dir(request.harness_env)
    model_socket, task_file, forwarder = (socket_dir / name for name in ("model.sock", "task.txt", FORWARDER.name))
    await asyncio.to_thread(_write_readable, task_file, request.task.encode())
    await asyncio.to_thread(_write_readable, forwarder, FORWARDER.read_bytes())
    port = random.randrange(20_000, 60_000)  # an isolated sandbox has a loopback of its own; unisolated, rarely taken
    q = shlex.quote
    script = "\n".join(
        [
            "(",
            f"export PRORL_HARNESS_ENV={q(str(env_dir))} PRORL_MODEL_URL=http://127.0.0.1:{port}/v1 "
            f"PRORL_TASK_FILE={q(str(task_file))} TERM=dumb NO_COLOR=1",
            f"{q(sandbox.spec.kernel_python)} -I {q(str(forwarder))} {q(str(model_socket))} {port} &",
            f"for _ in $(seq 200); do (: <>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.05; done",
            f"cd {q(request.cwd or sandbox.workspace)} || exit 127",
            request.command,
            ")",
        ]
    )
    started = time.perf_counter()
    async with ModelSocket(model_socket, request.model_base_url, request.timeout_s):
        result = await sandbox.bash(script, timeout=request.timeout_s)
    return HarnessRunResponse(
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        output=result.output,
        duration_s=time.perf_counter() - started,
    )


def _write_readable(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)  # never through a link the sandbox may have left in its place
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
