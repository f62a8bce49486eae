# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The placer: the sandbox hosts of one server (a HostSet per RayBackend and options), a SandboxHost
actor (host.py) on each Ray node that offers the host resource, placement over them, health,
drain, and loss.

- Hosts are actors owned by this process (not detached): if the server dies, Ray ends them,
  and their sandboxes with them; the next host on that node reaps the leftovers.
- Placement: among healthy, undrained hosts with a free slot, the least loaded (live/slots);
  a host that recently started a sandbox from the same image or repository wins if it is
  within LOCALITY_SLACK of the least loaded. With no free slot, a start waits (bounded).
- Health: every `health_interval_s` each host answers a ping; `health_failures` missed in a
  row and it gets no new sandboxes until it answers again. A host Ray reports dead (its
  process or node gone) is lost: the calls of its sandboxes raise SandboxLostError at once,
  and nodes are rescanned, so a node that comes back gets a host again (which reaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from typing import Any

import ray
from nemo_gym.global_config import (
    NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME,
    RAY_HEAD_NODE_ADDRESS_KEY_NAME,
    get_global_config_dict,
)
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from prorl_gym.sandbox.backends.ray.handle import HostHandle
from prorl_gym.sandbox.backends.ray.host import SandboxHost, locality_key
from prorl_gym.sandbox.backends.ray.options import RayOptions
from prorl_gym.sandbox.backends.ray.sandbox import RemoteSandbox
from prorl_gym.sandbox.backends.ray.stream import ToolStream
from prorl_gym.sandbox.errors import SandboxLostError, SandboxStartError
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)
LOCALITY_SLACK = 0.25  # a host that has the task's image/repository may be this much busier
SCAN_EVERY = 5  # health rounds between node scans
SHUTDOWN_TIMEOUT_S = 30.0
HOST_RESOURCE_SHARE = 0.001  # each host takes this much of its node's host resource (it only marks eligibility)


def connect(options: RayOptions) -> None:
    """Join Ray unless this process already has: the configured address, else the cluster of the
    stack this server belongs to (NeMo Gym's `ray_head_node_address`: our servers join it only now,
    prorl_gym/asgi.py `without_joining_ray`), else the one running here."""
    if not ray.is_initialized():
        address = options.address or os.environ.get("RAY_ADDRESS") or _stack_ray_address() or "auto"
        ray.init(address=address, namespace=options.namespace, log_to_driver=False, ignore_reinit_error=True)


def _stack_ray_address() -> str | None:
    """The Ray cluster of the NeMo Gym stack that started this process (ng_run hands its config over in
    the environment), if any."""
    if not os.environ.get(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME):
        return None
    return get_global_config_dict().get(RAY_HEAD_NODE_ADDRESS_KEY_NAME)


def capacity_of(node: dict[str, Any], options: RayOptions) -> int:
    """Slots per host: the configured slots, capped by the node's CPUs and memory budgets."""
    resources = node.get("Resources", {})
    slots = options.slots_per_host
    if options.cpus_per_sandbox > 0:
        slots = min(slots, int(resources.get("CPU", 0) / options.cpus_per_sandbox / options.hosts_per_node))
    if options.memory_per_sandbox_bytes > 0:
        memory = resources.get("memory", 0) / options.hosts_per_node
        slots = min(slots, int(memory / options.memory_per_sandbox_bytes))
    return max(slots, 0)


class HostSet:
    def __init__(self, options: RayOptions, root_dirs: list[str]):
        self.options = options
        self.root_dirs = root_dirs  # reaped by each host at its start
        self.hosts: dict[str, HostHandle] = {}
        self.lost: list[HostHandle] = []
        self._starting: set[str] = set()
        self._freed = asyncio.Condition()
        self._monitor: asyncio.Task | None = None
        self._host_class = ray.remote(SandboxHost)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await asyncio.to_thread(connect, self.options)
        await self.scan()
        if not self.hosts:
            raise SandboxStartError(
                f"no Ray node offers the resource {self.options.host_resource!r}: start sandbox nodes with "
                f"`ray start ... --resources '{{\"{self.options.host_resource}\": 1}}'`"
            )
        self._monitor = asyncio.create_task(self._monitor_forever(), name="sandbox host monitor")

    async def close(self) -> None:
        if self._monitor:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        hosts, self.hosts = list(self.hosts.values()), {}
        await asyncio.gather(*(self._stop_host(h) for h in hosts), return_exceptions=True)
        await asyncio.gather(*(h.close_stream() for h in self.lost), return_exceptions=True)

    async def _stop_host(self, host: HostHandle) -> None:
        with contextlib.suppress(Exception):
            await host.call("shutdown", timeout=SHUTDOWN_TIMEOUT_S)
        with contextlib.suppress(Exception):
            ray.kill(host.actor, no_restart=True)
        host.mark_lost()
        await host.close_stream()

    # ------------------------------------------------------------------ hosts

    async def scan(self) -> None:
        """Start a host on each eligible node that has none; lose hosts whose node died."""
        nodes = await asyncio.to_thread(ray.nodes)
        alive = {
            n["NodeID"]: n for n in nodes if n.get("Alive") and self.options.host_resource in n.get("Resources", {})
        }
        for host in list(self.hosts.values()):
            if host.node_id not in alive:
                self._lose(host, "its node is gone")
        starts = []
        for node_id, node in alive.items():
            for index in range(self.options.hosts_per_node):
                name = f"prorl-host-{owner_id()}-{node_id[:12]}-{index}"
                if name not in self.hosts and name not in self._starting:
                    starts.append(self._start_host(name, node))
        await asyncio.gather(*starts)

    async def _start_host(self, name: str, node: dict[str, Any]) -> None:
        self._starting.add(name)
        try:
            node_id = node["NodeID"]
            label = f"{node.get('NodeManagerHostname') or socket.gethostname()}@{node_id[:8]}"
            actor = self._host_class.options(
                name=name,
                namespace=self.options.namespace,
                num_cpus=0,
                resources={self.options.host_resource: HOST_RESOURCE_SHARE},
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                max_concurrency=10_000,
            ).remote(name, label)
            handle = HostHandle(name, node_id, actor, capacity_of(node, self.options))
            stream_address = node.get("NodeManagerAddress") if self.options.tool_stream else None
            try:
                status = await handle.call(
                    "start", self.root_dirs, stream_address, timeout=self.options.host_start_timeout_s
                )
            except (SandboxLostError, TimeoutError, RayActorError, GetTimeoutError) as exc:
                log.warning("sandbox host %s on node %s did not start: %s", name, label, exc)
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
                return
            handle.node = status["node"]
            if "stream" in status:
                handle.stream = ToolStream(tuple(status["stream"]["address"]), status["stream"]["token"], name)
            handle._on_release = self._notify_freed
            handle._on_lost = lambda host: self._lose(host, "its actor died")
            self.hosts[name] = handle
            self._notify_freed()
            log.info("sandbox host %s up on %s (%d slots)", name, handle.node, handle.capacity)
        finally:
            self._starting.discard(name)

    def _lose(self, host: HostHandle, why: str) -> None:
        if self.hosts.pop(host.name, None) is None:
            return
        lost = host.mark_lost()
        self.lost.append(host)
        log.error("sandbox host %s on %s is lost (%s): %d sandboxes with it", host.name, host.node, why, lost)

    def _notify_freed(self) -> None:
        async def notify() -> None:
            async with self._freed:
                self._freed.notify_all()

        with contextlib.suppress(RuntimeError):  # no loop: closing
            asyncio.get_running_loop().create_task(notify())

    async def _monitor_forever(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(self.options.health_interval_s)
            await asyncio.gather(*(self._check(h) for h in list(self.hosts.values())))
            rounds += 1
            if rounds % SCAN_EVERY == 0:
                with contextlib.suppress(Exception):
                    await self.scan()

    async def _check(self, host: HostHandle) -> None:
        try:
            await host.call("health", timeout=self.options.health_interval_s)
        except SandboxLostError:
            self._lose(host, "its actor died")
            return
        except (TimeoutError, Exception):  # noqa: BLE001 - a slow or failing host: unhealthy until it answers
            host.missed += 1
            if host.missed >= self.options.health_failures and host.healthy:
                host.healthy = False
                log.warning("sandbox host %s missed %d health checks: no new sandboxes", host.name, host.missed)
            return
        if not host.healthy:
            log.info("sandbox host %s is healthy again", host.name)
            self._notify_freed()
        host.missed, host.healthy = 0, True

    # ------------------------------------------------------------------ placement

    def pick(self, key: str | None) -> HostHandle | None:
        candidates = [h for h in self.hosts.values() if h.available]
        if not candidates:
            return None
        least = min(h.load for h in candidates)
        local = [h for h in candidates if key is not None and key in h.recent and h.load <= least + LOCALITY_SLACK]
        return min(local or candidates, key=lambda h: (h.load, h.name))

    async def create(self, spec: SandboxSpec, sandbox_id: str) -> RemoteSandbox:
        """A sandbox on the best host; waits (up to placement_timeout_s) for a free slot. A host
        found lost while starting it is dropped and the start goes to another, under a new id
        (the returned sandbox's id is the one that counts): the lost host may have started it
        already, and what it left is reaped by its node through the lease filed under the old
        id, which a retry under the same id would overwrite and, at its close, remove."""
        inner = spec.model_copy(update={"backend": self.options.inner})
        deadline = time.monotonic() + self.options.placement_timeout_s
        while True:
            host = await self._reserve(sandbox_id, locality_key(inner), deadline)
            try:
                info = await host.call("create", sandbox_id, inner.model_dump_json())
            except SandboxLostError:
                host.release(sandbox_id)
                sandbox_id = secrets.token_hex(6)
                continue
            except BaseException:
                host.counts["start_failures"] += 1
                host.release(sandbox_id)
                raise
            host.counts["started"] += 1
            host.remember(locality_key(inner))
            return RemoteSandbox(sandbox_id, spec, host, info)

    async def _reserve(self, sandbox_id: str, key: str | None, deadline: float) -> HostHandle:
        async with self._freed:
            while (host := self.pick(key)) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxStartError(
                        f"no sandbox host with a free slot after {self.options.placement_timeout_s}s "
                        f"({len(self.hosts)} hosts: {[h.status() for h in self.hosts.values()]})"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), timeout=min(remaining, self.options.health_interval_s))
            host.live.add(sandbox_id)
            return host

    async def drain(self, name: str, draining: bool = True) -> dict[str, Any]:
        host = self.hosts.get(name) or next((h for h in self.hosts.values() if h.node == name), None)
        if host is None:
            raise KeyError(f"no sandbox host {name!r}; hosts: {sorted(self.hosts)}")
        host.draining = draining
        await host.call("drain", draining)
        if not draining:
            self._notify_freed()
        return host.status()

    def status(self) -> list[dict[str, Any]]:
        return [h.status() for h in self.hosts.values()] + [h.status() for h in self.lost]
