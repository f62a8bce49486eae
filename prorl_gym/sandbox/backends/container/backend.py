# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `container` backend: each sandbox a container, through the Docker Engine API (Docker, or
Podman's `podman system service`: one code path for both).

The container's pid 1 is a small spawner (spawner_main.py, run by the sandbox's Python; it starts
as container root with only SETUID, SETGID and CHOWN, and drops to the sandbox uid once its socket is
bound). Each runtime process (pty bash, kernel, file shell) is spawned on the host as attach_main.py, which hands its file descriptors (the pty slave,
the kernel's pipes and control socket) to the spawner over a Unix socket; the spawner runs the
program with them, as the sandbox uid with the rlimits. So the shells and the kernel are driven
from outside exactly as for bubblewrap: the pty master and the ZMQ sockets stay here, and no
per-command call goes through the engine (a command costs what it costs on bwrap).

Inside: the image (read-only by default) and, of the host, only
  tmpfs (limits.workspace_bytes)  -> spec.workspace   the sandbox uid's
  tmpfs (limits.tmp_bytes)        -> /tmp
  <private>/run   -> same path: kernel sockets (the connection file names this path); ours, with a
                     subdirectory per kernel the sandbox may write until its sockets are bound
  <private>/ctl   -> same path, read-only: connection files
  <private>/spawn -> same path: the spawner's socket (root's: the sandbox uid cannot connect)
  python_dirs(kernel_python), read-only, and spec.binds
no network unless spec.network, all capabilities dropped but the spawner's three until it drops
them (no-new-privileges: nothing regains any, not a setuid binary), memory and process caps by the engine's cgroups, labels naming the owner
(owner.py): a reaper removes a dead server's containers by them and never touches another's.
A fork is refused (can_fork False): a running container's tmpfs is not copied cheaply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
from functools import cache
from pathlib import Path

from prorl_gym.sandbox.backends.base import PlacementBackend, PlacementBase
from prorl_gym.sandbox.backends.container.engine import Engine, EngineError, default_socket
from prorl_gym.sandbox.backends.container.image import ensure_base_image
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.inside import SANDBOX_ENV, python_dirs
from prorl_gym.sandbox.layout import private_dir_of
from prorl_gym.sandbox.leases import Lease
from prorl_gym.sandbox.limits import rlimits
from prorl_gym.sandbox.owner import owned_here, owner_alive, owner_id
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)
OWNER_LABEL = "prorl-gym.owner"
SANDBOX_LABEL = "prorl-gym.sandbox"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The spawner's, until it drops to the sandbox uid once started (spawner_main.py): give the sandbox its
# workspace, become the sandbox uid. After that no process of the container has any.
CAPABILITIES = ["SETUID", "SETGID", "CHOWN"]
ATTACH = str(Path(__file__).parent / "attach_main.py")


class ContainerError(EngineError):
    """A container sandbox could not be started (the engine's refusal, a spawner that never came up)."""


@cache
def spawner_source() -> str:
    # Named on its first line: that is what `ps` shows of pid 1.
    return "# prorl-gym container spawner\n" + (Path(__file__).parent / "spawner_main.py").read_text()


def container_name(sandbox_id: str, owner: str | None = None) -> str:
    return f"prorl-{owner or owner_id()}-{sandbox_id}"


def container_env(spec: SandboxSpec) -> dict[str, str]:
    # The image's PATH, then the sandbox Python's bin (bound in): `python` where the image has only python3.
    path = f"{IMAGE_PATH}:{os.path.dirname(spec.kernel_python)}"
    env = {"PATH": path, "HOME": spec.workspace, "TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/.ipython"}
    return {**env, **SANDBOX_ENV, **spec.env}


def image_of(spec: SandboxSpec) -> str | None:
    """A row's image (a docker:// URI or a name) or the options' default; None: the base image."""
    image = spec.image or spec.backend.image
    return image.removeprefix("docker://") if image else None


class ContainerPlacement(PlacementBase):
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec, engine: Engine):
        super().__init__(sandbox_id, private_dir, spec)
        options: ContainerOptions = spec.backend
        self.sandbox_uid = options.uid
        self.instance = container_name(sandbox_id)  # recorded in the lease, for the reaper
        self.pids: list[int] = []  # nothing of ours to signal: removing the container ends it all
        self.spawn_fds: dict[int, int] = {}
        self.init_pid: int | None = None  # the spawner's host pid, once started (no zygote joins it)
        self.fork_dirs: tuple[str, ...] = ()
        limits = spec.limits.model_copy(update={"processes": None})  # RLIMIT_NPROC counts the uid host-wide
        self.rlimits = rlimits(limits)
        self.spawn_dir = private_dir / "spawn"
        self.spawn_socket = self.spawn_dir / "spawner.sock"
        self._engine = engine
        self._created = False

    # ---------------------------------------------------------------- start

    def _make_dirs(self) -> None:
        for sub in (self.socket_dir, self.control_dir, self.spawn_dir):
            sub.mkdir(parents=True, exist_ok=True)
        os.chmod(self.private_dir, 0o711)  # the sandbox uid passes through to its run/ctl binds
        for directory in (self.socket_dir, self.control_dir):  # ours: each kernel gets a subdirectory of
            os.chmod(directory, 0o755)  # run/ it may write until its sockets are bound (runtime/kernel.py)
        os.chmod(self.spawn_dir, 0o700)  # root's: the spawner's socket and ready fifo
        os.mkfifo(self.spawn_dir / "ready", 0o600)

    def config(self, image: str) -> dict:
        spec, options = self._spec, self._spec.backend
        limits = spec.limits
        binds = [f"{self.socket_dir}:{self.socket_dir}:rw", f"{self.control_dir}:{self.control_dir}:ro"]
        binds.append(f"{self.spawn_dir}:{self.spawn_dir}:rw")
        binds += [f"{path}:{path}:ro" for path in python_dirs(spec.kernel_python)]
        binds += [f"{b.src}:{b.dst or b.src}:{'rw' if b.writable else 'ro'}" for b in spec.binds]
        uid = options.uid
        tmpfs = {
            "/tmp": f"rw,nosuid,nodev,size={limits.tmp_bytes},mode=1777",
            spec.workspace: f"rw,nosuid,nodev,size={limits.workspace_bytes},mode=0755",  # the spawner chowns it
        }
        memory = options.memory_bytes or limits.memory_bytes
        host_config = {
            "Binds": binds,
            "Tmpfs": tmpfs,
            "NetworkMode": "bridge" if spec.network else "none",
            "CapDrop": ["ALL"],
            "CapAdd": CAPABILITIES,
            "SecurityOpt": ["no-new-privileges"],
            "Privileged": False,
            "ReadonlyRootfs": options.read_only_root and not options.writable,
            "PidsLimit": limits.processes or 0,
            "Memory": memory or 0,
            "MemorySwap": memory or 0,  # no swap beyond it
            "IpcMode": "private",
            "ShmSize": limits.tmp_bytes,  # /dev/shm: bounded like /tmp
        }
        if options.runtime:
            host_config["Runtime"] = options.runtime
        spawner = {
            "socket": str(self.spawn_socket),
            "ready": str(self.spawn_dir / "ready"),
            "uid": uid,
            "rlimits": self.rlimits,
            "chown": [spec.workspace],
            "chown_trees": list(options.writable),
        }
        argv = [spec.kernel_python, "-I", "-S", "-c", spawner_source(), json.dumps(spawner)]
        return {
            "Image": image,
            "Entrypoint": argv[:1],
            "Cmd": argv[1:],
            "User": "0:0",
            "WorkingDir": "/",
            "Env": [f"PATH={IMAGE_PATH}"],
            "Labels": {OWNER_LABEL: owner_id(), SANDBOX_LABEL: self.sandbox_id},
            "NetworkDisabled": not spec.network,
            "StopSignal": "SIGKILL",
            "HostConfig": host_config,
        }

    async def start(self, image: str) -> None:
        await asyncio.to_thread(self._make_dirs)
        ready = os.open(self.spawn_dir / "ready", os.O_RDWR | os.O_NONBLOCK)  # RDWR: never an EOF before it writes
        try:
            config = await asyncio.to_thread(self.config, image)  # reads the venv's pyvenv.cfg
            self._created = True  # from here on close() removes it, whether create answered or not
            creating = asyncio.ensure_future(self._engine.create(self.instance, config))
            try:
                await asyncio.shield(creating)
            except asyncio.CancelledError:  # the engine's answer first: close() must find what it made
                await asyncio.gather(creating, return_exceptions=True)
                raise
            await self._engine.start(self.instance)
            await self._wait_ready(ready)
        finally:
            os.close(ready)
        state = (await self._engine.inspect(self.instance))["State"]
        self.init_pid = state.get("Pid") or None

    async def _wait_ready(self, ready: int) -> None:
        """Until the spawner says it listens (its line in the fifo), the container exits, or the timeout."""
        loop = asyncio.get_running_loop()
        said: asyncio.Future[None] = loop.create_future()
        loop.add_reader(ready, lambda: said.done() or said.set_result(None))
        exited = asyncio.ensure_future(self._engine.wait(self.instance))
        try:
            done, _ = await asyncio.wait(
                [said, exited], timeout=self._spec.start_timeout_s, return_when="FIRST_COMPLETED"
            )
        finally:
            loop.remove_reader(ready)
            exited.cancel()
            await asyncio.gather(exited, return_exceptions=True)
        if said not in done:
            logs = (await self._engine.logs(self.instance))[-1000:]
            what = "exited" if exited in done else f"did not start in {self._spec.start_timeout_s} s"
            raise ContainerError(f"container {self.instance}: its spawner {what}: {logs!r}")

    # ---------------------------------------------------------------- the contract

    def wrap(self, argv: list[str]) -> list[str]:
        return [sys.executable, "-I", "-S", ATTACH, str(self.spawn_socket), self.workspace, *argv]

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        return self.wrap(argv), ""  # the spawner sets the rlimits of everything it starts

    def environment(self) -> dict[str, str]:
        return container_env(self._spec)

    async def close(self) -> bool:
        """Remove the container (SIGKILL to all of it), then the private directory. False if the
        engine could not confirm it gone: the lease stays for a reaper."""
        if self._closed:
            return self._gone
        self._closed = True
        self._gone = True
        if self._created:
            try:
                await self._engine.remove(self.instance)
            except EngineError as exc:
                log.warning("could not remove container %s: %s", self.instance, exc)
                self._gone = False
        if self._gone:
            await asyncio.to_thread(shutil.rmtree, self.private_dir, True)
        return self._gone


class ContainerBackend(PlacementBackend):
    options = ContainerOptions

    def __init__(self) -> None:
        self._engines: dict[str, Engine] = {}
        self._base_image: dict[str, asyncio.Task[str]] = {}  # per socket: built once, whoever asks first
        self._swept: set[str] = set()  # sockets whose dead owners' containers were looked for

    def engine(self, options: ContainerOptions) -> Engine:
        path = options.socket or default_socket()
        if path is None:
            raise ContainerError(
                "no container engine: set sandbox.backend.socket (or DOCKER_HOST=unix://...) to Docker's "
                "socket or to `podman system service`'s"
            )
        if path not in self._engines:
            self._engines[path] = Engine(path)
        return self._engines[path]

    def check(self, spec: SandboxSpec) -> None:
        if spec.backend.uid == 0:
            raise ValueError("the container backend runs sandboxes as an unprivileged uid: backend.uid must not be 0")

    def can_fork(self, spec: SandboxSpec) -> bool:
        return False

    def zygote_config(self, spec: SandboxSpec) -> None:
        return None  # each kernel is a process of its own, started by the container's spawner

    async def _image(self, engine: Engine, spec: SandboxSpec) -> str:
        image = image_of(spec)
        if image is not None:
            return image
        building = self._base_image.get(engine.socket_path)
        if building is None or (building.done() and building.exception() is not None):
            building = self._base_image[engine.socket_path] = asyncio.ensure_future(ensure_base_image(engine))
        return await asyncio.shield(building)

    async def sweep_dead_owners(self, engine: Engine) -> list[str]:
        """Once per engine: remove the containers of this host's dead owners, by their owner label,
        whether a lease names them or not (a sandbox root removed with its leases). A live owner's,
        or another host's, are never touched. The names of those removed."""
        if engine.socket_path in self._swept:
            return []
        self._swept.add(engine.socket_path)
        removed = []
        for container in await engine.list({OWNER_LABEL: None}):
            owner = container["Labels"][OWNER_LABEL]
            if owned_here(owner) and not owner_alive(owner) and await engine.remove(container["Id"]):
                log.warning("removed container %s: its owner %s is gone", container["Names"], owner)
                removed.append(container["Id"])
        return removed

    async def place(self, sandbox_id: str, spec: SandboxSpec) -> ContainerPlacement:
        self.check(spec)
        engine = self.engine(spec.backend)
        await self.sweep_dead_owners(engine)
        image = await self._image(engine, spec)
        private_dir = private_dir_of(spec.root_dir, sandbox_id)
        private_dir.mkdir(parents=True, exist_ok=True)
        placement = ContainerPlacement(sandbox_id, private_dir, spec, engine)
        try:
            await placement.start(image)
        except BaseException as exc:
            if not await asyncio.shield(placement.close()) and isinstance(exc, EngineError):
                exc.may_live = True  # the lease stays: a reaper finishes it
            raise
        return placement

    async def reap(self, lease: Lease) -> bool:
        """A dead owner's (or an abandoned) sandbox: its containers by their labels, that owner's only."""
        options = ContainerOptions.model_validate(lease.options) if lease.options else ContainerOptions()
        engine = self.engine(options)
        try:
            await self.sweep_dead_owners(engine)
            found = await engine.list({OWNER_LABEL: lease.owner, SANDBOX_LABEL: lease.sandbox_id})
            for container in found:
                await engine.remove(container["Id"])
        except EngineError as exc:
            log.warning("could not reap the container of sandbox %s: %s", lease.sandbox_id, exc)
            return False
        return True

    async def close(self) -> None:
        for task in self._base_image.values():
            task.cancel()
        self._base_image.clear()
        self._swept.clear()
        engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            await engine.close()
