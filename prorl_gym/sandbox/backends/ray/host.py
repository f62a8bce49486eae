# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A sandbox host: the sandboxes of one node, created and driven there.

placer.py runs it as a Ray actor pinned to its node; it is a plain class so that it can be
tested without Ray. Sandboxes are made by the inner backend (bubblewrap, Apptainer) exactly
as on one machine: the pty, the kernel sockets and the files never leave the node, only
calls and their results cross the network. At start it reaps what an earlier host on this
node left (leases of dead owners), then keeps reaping periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import Counter, OrderedDict
from typing import Any

from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.runtime.zygote import KernelZygote, ZygoteConfig
from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.sandbox.backends.ray.stream import ToolStreamServer
from prorl_gym.sandbox.errors import SandboxClosedError, SandboxForkError, SandboxStartError
from prorl_gym.sandbox.fork import Template
from prorl_gym.sandbox.reaper import reap_stale
from prorl_gym.sandbox.sandbox import Sandbox, create_sandbox
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)
REAP_INTERVAL_S = 60.0
LOCALITY_KEYS = 4096  # images / repositories this host has recently started sandboxes from


class HostDrainingError(SandboxStartError):
    """The host takes no new sandboxes (drained for maintenance, or shutting down)."""


def locality_key(spec: SandboxSpec) -> str | None:
    """What a task's sandbox start costs less on a host that has seen it: its image, or the
    repository bound in (SWE), else nothing."""
    if spec.image:
        return f"image:{spec.image}"
    sources = sorted(bind.src for bind in spec.binds)
    return f"binds:{','.join(sources)}" if sources else None


class SandboxHost:
    def __init__(self, name: str, node: str):
        self.name = name
        self.node = node  # e.g. "<hostname>@<ray node id>": what rollout records show as their host
        self.draining = False
        self.counts: Counter[str] = Counter()
        self._backends = Backends()  # the inner backends, one instance each for this host's life
        self._sandboxes: dict[str, Sandbox] = {}
        self._templates: dict[str, Template] = {}  # frozen sandboxes of this node, to fork from
        self._zygotes: dict[ZygoteConfig, KernelZygote] = {}
        self._zygote_lock = asyncio.Lock()
        self._roots: set[str] = set()
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._reaper: asyncio.Task | None = None
        self._stream: ToolStreamServer | None = None
        self._started = time.time()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, root_dirs: list[str], stream_address: str | None = None) -> dict[str, Any]:
        """Reap what an earlier host on this node left under these sandbox roots, then serve; with
        stream_address (the node's address), tool calls on a stream too (stream.py)."""
        for root in root_dirs:
            await self._reap(root)
        self._reaper = asyncio.create_task(self._reap_forever())
        status = self.status()
        if stream_address is not None:
            self._stream = ToolStreamServer(self)
            status["stream"] = await self._stream.start(stream_address)
        return status

    async def shutdown(self) -> None:
        """Close every sandbox (the server is going away); no new ones."""
        self.draining = True
        if self._reaper:
            self._reaper.cancel()
        if self._stream is not None:
            await self._stream.close()
        sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        templates, self._templates = list(self._templates.values()), {}
        await asyncio.gather(*(t.close() for t in templates), return_exceptions=True)  # go with their forks
        await asyncio.gather(*(sb.close() for sb in sandboxes), return_exceptions=True)
        await asyncio.gather(*(z.close() for z in self._zygotes.values()), return_exceptions=True)
        for root in list(self._roots):  # what a lost host on this node left since the last sweep
            await self._reap(root)
        await self._backends.close()

    def drain(self, draining: bool = True) -> dict[str, Any]:
        """Stop (or resume) taking new sandboxes; the running ones finish as usual."""
        self.draining = draining
        return self.status()

    def health(self) -> dict[str, Any]:
        return {"live": len(self._sandboxes), "draining": self.draining}

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "hostname": socket.gethostname(),
            "live": len(self._sandboxes),
            "draining": self.draining,
            "started": self.counts["started"],
            "start_failures": self.counts["start_failures"],
            "closed": self.counts["closed"],
            "kernels": len(self._zygotes),
            "up_s": round(time.time() - self._started, 1),
        }

    def has(self, key: str) -> bool:
        return key in self._recent

    # ------------------------------------------------------------------ sandboxes

    async def create(self, sandbox_id: str, spec_json: str) -> dict[str, Any]:
        """A sandbox of the inner backend's spec; what the client needs to know of it."""
        if self.draining:
            raise HostDrainingError(f"sandbox host {self.name} is draining")
        spec = SandboxSpec.model_validate_json(spec_json)
        await self._note_root(spec.root_dir)
        try:
            zygote = await self._zygote(spec)
            sandbox = await create_sandbox(spec, sandbox_id, zygote=zygote, backends=self._backends)
        except BaseException:
            self.counts["start_failures"] += 1
            raise
        if (key := locality_key(spec)) is not None:
            self._recent[key] = None
            self._recent.move_to_end(key)
            while len(self._recent) > LOCALITY_KEYS:
                self._recent.popitem(last=False)
        return self._serve(sandbox)

    def _serve(self, sandbox: Sandbox) -> dict[str, Any]:
        self._sandboxes[sandbox.id] = sandbox
        self.counts["started"] += 1
        return {"host": self.node, "workspace": sandbox.workspace, "own_pid_namespace": sandbox.own_pid_namespace}

    # ------------------------------------------------------------------ fork (sandbox/fork.py), on this node

    async def freeze(self, sandbox_id: str, consume: bool) -> dict[str, Any]:
        sandbox = self._get(sandbox_id)
        template = await sandbox.freeze(consume)
        if consume:  # closed by the freeze: its files are the template's now
            self._sandboxes.pop(sandbox_id, None)
            self.counts["closed"] += 1
        self._templates[template.id] = template
        return {"template_id": template.id, "dropped": template.dropped}

    async def spawn(self, template_id: str, sandbox_ids: list[str]) -> list[dict[str, Any]]:
        try:
            template = self._templates[template_id]
        except KeyError:
            raise SandboxForkError(f"no template {template_id} on host {self.name} (closed)") from None
        forks = await template.spawn(len(sandbox_ids), ids=sandbox_ids)
        return [self._serve(fork) for fork in forks]

    async def close_template(self, template_id: str) -> None:
        if (template := self._templates.pop(template_id, None)) is not None:
            await template.close()

    async def close(self, sandbox_id: str) -> bool:
        """Close it; whether it had started a Python kernel."""
        sandbox = self._sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return False
        self.counts["closed"] += 1
        await sandbox.close()
        return sandbox.kernel_started

    def _get(self, sandbox_id: str) -> Sandbox:
        try:
            return self._sandboxes[sandbox_id]
        except KeyError:
            raise SandboxClosedError(f"sandbox {sandbox_id} is not on host {self.name} (closed)") from None

    async def bash(self, sandbox_id: str, command: str, timeout: float | None) -> ShellResult:
        return await self._get(sandbox_id).bash(command, timeout)

    async def python(self, sandbox_id: str, code: str, timeout: float | None) -> PythonResult:
        return await self._get(sandbox_id).python(code, timeout)

    async def read_file(self, sandbox_id: str, path: str, start: int | None, end: int | None) -> str:
        return await self._get(sandbox_id).read_file(path, start, end)

    async def read_bytes(self, sandbox_id: str, path: str) -> bytes:
        return await self._get(sandbox_id).read_bytes(path)

    async def write_file(self, sandbox_id: str, path: str, content: str | bytes) -> str:
        return await self._get(sandbox_id).write_file(path, content)

    async def edit_file(self, sandbox_id: str, path: str, old: str, new: str) -> str:
        return await self._get(sandbox_id).edit_file(path, old, new)

    def warm_up_kernel(self, sandbox_id: str) -> None:
        self._get(sandbox_id).warm_up_kernel()

    # ------------------------------------------------------------------ internals

    async def _zygote(self, spec: SandboxSpec) -> KernelZygote | None:
        """One kernel zygote per distinct config (as a resources server keeps one for its spec)."""
        config = self._backends.get(spec).zygote_config(spec)
        if config is None:
            return None
        async with self._zygote_lock:
            zygote = self._zygotes.get(config)
            if zygote is None:
                zygote = self._zygotes[config] = KernelZygote(config)
                await zygote.start()
        return zygote

    async def _note_root(self, root: str) -> None:
        if root not in self._roots:
            await self._reap(root)

    async def _reap(self, root: str) -> None:
        self._roots.add(root)
        with contextlib.suppress(OSError):
            reaped = await reap_stale(root, self._backends)
            if reaped:
                log.warning("host %s reaped %d sandboxes left on this node: %s", self.name, len(reaped), reaped)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(REAP_INTERVAL_S)
            for root in list(self._roots):
                await self._reap(root)
