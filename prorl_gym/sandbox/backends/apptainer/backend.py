# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `apptainer` backend: sandboxes as Apptainer (or SingularityCE) instances, for HPC.

The shape of bwrap.py: one long-lived instance per sandbox holds the namespaces (its pid 1
is Apptainer's init, which the sandbox cannot kill), and each runtime process (pty bash,
IPython kernel, file shell) joins it with one long-lived `apptainer exec instance://<name>`.
Our own command lines (cli.py), not spython's: it runs `singularity --version`
before every call, hard-codes the binary, drops contain=True and exits the process on a
missing bind path.

Inside: the image under an overlay whose writes go to the node's disk (<private>/overlay;
`overlay: tmpfs` or a site that refuses it: --writable-tmpfs, capped by `sessiondir max
size`) and, of the host, only:
  <private>/workspace -> spec.workspace   read-write, on disk
  <private>/work      -> /tmp, /var/tmp   (--workdir), same reason
  <private>/copies/i  -> disk_copies[i]   a copy of that image directory, ours (a root-owned
                                          /testbed is read-only without fakeroot)
  <private>/run       -> <private>/run    kernel sockets: the connection file names this path
  python_dirs(kernel_python), read-only as in bwrap (nothing to bind: the image's interpreter)
  spec.binds
--containall skips the site's `bind path`s (Apptainer adds only /etc/localtime and a localhost
/etc/hosts); no home; no network unless asked. Environment: --cleanenv and a 0600 env file,
except HOME (Apptainer refuses it: `env` sets it inside) and PATH (the image's own, e.g. its
conda env, unless spec.env sets it). Instance names carry owner_id(), so stopping or reaping
never touches another job's instances.

limits.processes (RLIMIT_NPROC) counts per sandbox only inside a user namespace on kernels
>= 5.14; elsewhere (EL8's 4.18, setuid installs) it would count every task of the user on
the node, so there it is not set (`nproc: auto`, with a warning) unless `nproc: enforce`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import shutil
import time
from pathlib import Path

from prorl_gym.sandbox.backends.apptainer.cli import (
    INSTALL_HINT,
    ApptainerError,
    ApptainerTimeout,
    StopResult,
    copies_dir,
    copy_out_argv,
    host_env,
    instance_name,
    instance_start_argv,
    join_argv,
    kill_master,
    limits_prefix,
    read_instance,
    remove_instance_files,
    run,
    stop,
    write_env_file,
)
from prorl_gym.sandbox.backends.apptainer.options import ApptainerOptions, config_dir_of
from prorl_gym.sandbox.backends.apptainer.pull import ImagePulls
from prorl_gym.sandbox.backends.base import PlacementBackend, PlacementBase
from prorl_gym.sandbox.backends.inside import SANDBOX_ENV
from prorl_gym.sandbox.layout import private_dir_of
from prorl_gym.sandbox.leases import Lease
from prorl_gym.sandbox.limits import ulimit_command
from prorl_gym.sandbox.spec import ResourceLimits, SandboxSpec

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 30.0
# After a start timed out, its instance (detached by the starter) may still register: how long
# close() keeps stopping it by name, and how long a reaper waits before forgetting such a lease.
LATE_START_GRACE_S = 15.0
ABANDONED_GRACE_S = 600.0
NPROC_PER_NAMESPACE_KERNEL = (5, 14)  # RLIMIT_NPROC counted per user namespace from here on


def container_env(spec: SandboxSpec) -> dict[str, str]:
    """The env file's variables (HOME aside): bwrap's allow-list, PATH only if spec.env sets it;
    no bytecode (it would fill the overlay and go stale as the agent edits)."""
    env = {"TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/.ipython", "PYTHONDONTWRITEBYTECODE": "1", **SANDBOX_ENV}
    return {key: value for key, value in (env | spec.env).items() if key != "HOME"}


def kernel_release() -> str:  # a function: tests model other kernels
    return os.uname().release


def nproc_counted_per_sandbox(userns: bool | None, release: str) -> bool:
    """RLIMIT_NPROC counts only the sandbox's tasks: in a user namespace, on kernel >= 5.14
    (EL kernels backport much, so a site that knows better sets `nproc: enforce`)."""
    try:
        version = tuple(int(part) for part in release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return bool(userns) and version >= NPROC_PER_NAMESPACE_KERNEL


class Site:
    """What one backend instance knows of its site and has said about it: binaries whose site
    refused an --overlay directory (their sandboxes go straight to tmpfs), warnings given (once
    each), and its image pulls (one per image at a time)."""

    def __init__(self) -> None:
        self.overlay_refused: set[str] = set()
        self.warned: set[str] = set()
        self.pulls = ImagePulls()

    def warn_once(self, key: str, message: str, *args) -> None:
        if key not in self.warned:
            self.warned.add(key)
            log.warning(message, *args)


def effective_limits(spec: SandboxSpec, userns: bool | None, site: Site) -> ResourceLimits:
    mode, limits = spec.backend.nproc, spec.limits
    if limits.processes is None or mode == "enforce":
        return limits
    if mode == "auto" and nproc_counted_per_sandbox(userns, kernel_release()):
        return limits
    if mode == "auto":
        site.warn_once(
            "nproc",
            "limits.processes is NOT enforced in apptainer sandboxes here (user namespace: %s, kernel %s): "
            "RLIMIT_NPROC would count every task of this user on the node. Set sandbox.backend.nproc=enforce "
            "if this kernel counts per user namespace.",
            userns,
            kernel_release(),
        )
    return limits.model_copy(update={"processes": None})


def raise_nproc_soft_limit() -> None:
    """The server's own RLIMIT_NPROC caps all its sandboxes' tasks: raise the soft limit to the
    hard one (EL's default soft limit of 4096 is reached by a few dozen sandboxes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))


# ---------------------------------------------------------------- placement and backend


class ApptainerPlacement(PlacementBase):
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec, binary: str, site: Site):
        super().__init__(sandbox_id, private_dir, spec)  # its processes are the server's user (never root)
        self.spawn_fds: dict[int, int] = {}
        self.init_pid: int | None = None  # kernels join through `apptainer exec`, not a zygote
        self.rlimits: dict[str, int | list[int]] = {}
        self.instance = instance_name(sandbox_id)  # recorded in the lease, for the reaper
        self.pids: list[int] = []  # nothing of ours to signal: stopping the instance ends it all
        self.limits = spec.limits  # what is enforced here (see effective_limits), known once started
        self.config_dir = config_dir_of(spec.backend, spec.root_dir)
        self.env_file = private_dir / "env"
        self._binary = binary
        self._site = site
        self._host = host_env(os.environ, self.config_dir)
        self._started = False
        self._start_timed_out = False
        self._gone = True

    async def start(self) -> None:
        spec, image = self._spec, self._spec.image
        await asyncio.to_thread(self._make_dirs)
        if not image:
            raise ApptainerError("the apptainer backend needs sandbox.image: a .sif path or a docker:// URI")
        if "://" in image:  # the pre-pulled .sif; pulled here (once per image) if it is missing
            image = str(await self._site.pulls.get(image, spec.backend.cache_dir, self._binary))
        elif not os.path.exists(image):
            raise ApptainerError(f"image {image} does not exist")
        if spec.template_lowers:  # never made here: only a placement with its writes apart layers a snapshot
            raise ApptainerError("a layered template (a bubblewrap fork's snapshot) cannot start on Apptainer")
        if spec.template_dir is not None:  # a fork: its template's files, not the image's
            await self._copy_template(Path(spec.template_dir))
        elif spec.backend.disk_copies:
            code, out = await run(copy_out_argv(spec, self.private_dir, image, self._binary), None, self._host)
            if code != 0:
                raise ApptainerError(f"copying {list(spec.backend.disk_copies)} out of {image} failed: {out}")
        self._started = True
        await self._start_instance(image)
        state = await asyncio.to_thread(read_instance, self.config_dir, self.instance) or {}
        self.limits = effective_limits(spec, state.get("userns"), self._site)

    @property
    def fork_dirs(self) -> tuple[str, ...]:
        """What a fork carries (sandbox/fork.py): /tmp, the workspace and the disk copies. Changes to
        the image's own directories (its overlay) are not carried."""
        return ("/tmp", self.workspace, *self._spec.backend.disk_copies)

    def _host_dir(self, path: str) -> Path:
        """The host directory behind one of fork_dirs."""
        if path == "/tmp":
            return self.private_dir / "work" / "tmp"  # --workdir: Apptainer binds <workdir>/tmp
        if path == self.workspace:
            return self.private_dir / "workspace"
        return copies_dir(self.private_dir, self._spec.backend.disk_copies.index(path))

    async def _copy_template(self, files: Path) -> None:
        """Rootless Apptainer cannot mount a copy-on-write layer over a bind: a fork gets a copy
        (reflinked where the file system can: XFS, btrfs). The template is ours and never written
        by a sandbox, so the copy follows nothing a sandbox controls."""
        for path in self.fork_dirs:
            source, target = files / path.lstrip("/"), self._host_dir(path)
            target.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                proc = await asyncio.create_subprocess_exec(
                    "cp", "-a", "--reflink=auto", f"{source}/.", f"{target}/",
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                _, err = await proc.communicate()
                if proc.returncode != 0:
                    raise ApptainerError(f"copying the template's {path} failed: {err.decode(errors='replace')}")

    def _make_dirs(self) -> None:
        for sub in ("workspace", "work", "run", "ctl", "overlay"):
            (self.private_dir / sub).mkdir(parents=True, exist_ok=True)
        for index in range(len(self._spec.backend.disk_copies)):
            copies_dir(self.private_dir, index).mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_env_file(self.env_file, container_env(self._spec))

    async def _start_instance(self, image: str) -> None:
        spec = self._spec
        overlay = "tmpfs" if self._binary in self._site.overlay_refused else spec.backend.overlay
        while True:
            argv = instance_start_argv(spec, self.instance, self.private_dir, image, self._binary, overlay)
            try:
                code, out = await run(argv, spec.start_timeout_s, self._host, self.private_dir / "apptainer.log")
            except ApptainerTimeout:
                self._start_timed_out = True
                raise
            if code != 0 and overlay == "dir" and "overlay" in out.lower():
                self._site.overlay_refused.add(self._binary)
                self._site.warn_once(
                    f"overlay:{self._binary}",
                    "this site refuses an --overlay directory (%s); sandboxes use --writable-tmpfs, "
                    "capped by `sessiondir max size` (see docs/hpc.md, site checklist)",
                    out.strip().splitlines()[-1] if out.strip() else f"exit {code}",
                )
                overlay = "tmpfs"
                continue
            if code != 0:
                raise ApptainerError(f"`{self._binary} instance start` failed (exit {code}): {out}")
            return

    def _join(self, shell: bool) -> list[str]:
        return join_argv(self._spec, self.instance, self._host, self.env_file, self._binary, shell=shell)

    def wrap(self, argv: list[str]) -> list[str]:
        return self._join(shell=False) + limits_prefix(self.limits) + list(argv)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """As bwrap: a shell sets its limits itself with `ulimit` (one exec less per start)."""
        return self._join(shell=True) + list(argv), ulimit_command(self.limits)

    def environment(self) -> dict[str, str]:
        return {"HOME": self._spec.env.get("HOME", self.workspace), **container_env(self._spec)}

    async def close(self) -> bool:
        """Stop this instance only (SIGKILL to its pid 1 ends everything in it), remove the files.
        False if it may still run (a start that timed out and never showed up): then the files
        stay, and the lease with them, for a reaper."""
        if self._closed:
            return self._gone
        self._closed = True
        if self._started:
            self._gone = await (self._stop_late_start() if self._start_timed_out else self._stop())
        if self._gone:
            await asyncio.to_thread(remove_instance_files, self.config_dir, self.instance)
            await asyncio.to_thread(shutil.rmtree, self.private_dir, True)
        return self._gone

    async def _stop(self) -> bool:
        result, out = await stop(self.instance, self._binary, self._host, STOP_TIMEOUT_S)
        if result is StopResult.FAILED:
            log.warning("could not stop apptainer instance %s: %s", self.instance, out)
        return result is not StopResult.FAILED

    async def _stop_late_start(self) -> bool:
        """The starter detaches the instance (setsid) before it registers: killing the CLI does not
        end it, and it may register after a stop found nothing. Kill its master by title, and stop
        it by name until it shows up or the grace runs out."""
        deadline = time.monotonic() + LATE_START_GRACE_S
        while True:
            killed = await asyncio.to_thread(kill_master, self.instance)
            result, _ = await stop(self.instance, self._binary, self._host, STOP_TIMEOUT_S)
            if killed or result is StopResult.STOPPED:
                return True
            if time.monotonic() > deadline:
                log.warning(
                    "apptainer instance %s timed out starting and did not show up; its lease stays", self.instance
                )
                return False
            await asyncio.sleep(0.5)


def running_as_root() -> bool:  # a function: tests with a fake apptainer may run as root
    return os.geteuid() == 0


class ApptainerBackend(PlacementBackend):
    options = ApptainerOptions

    def __init__(self) -> None:
        self.site = Site()

    def check(self, spec: SandboxSpec) -> None:
        pass  # the image is checked at placement: a row may bring its own

    def can_fork(self, spec: SandboxSpec) -> bool:
        return True  # a fork starts with a copy of its template's directories (see ApptainerPlacement)

    def zygote_config(self, spec: SandboxSpec) -> None:
        return None  # kernels join the instance through `apptainer exec`, each a process of its own

    async def place(self, sandbox_id: str, spec: SandboxSpec) -> ApptainerPlacement:
        binary = shutil.which(spec.backend.binary)
        if binary is None:
            raise ApptainerError(f"{spec.backend.binary!r} not found on PATH: {INSTALL_HINT}")
        if running_as_root():  # no user namespace then: the sandbox would be host root
            raise ApptainerError("refusing to run Apptainer sandboxes as root: run the server as an unprivileged user")
        raise_nproc_soft_limit()
        private_dir = private_dir_of(spec.root_dir, sandbox_id)
        private_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(private_dir, 0o700)
        placement = ApptainerPlacement(sandbox_id, private_dir, spec, binary, self.site)
        try:
            await placement.start()
        except BaseException as exc:
            if not await placement.close() and isinstance(exc, ApptainerError):
                exc.may_live = True  # the lease stays: a reaper finishes it
            raise
        return placement

    async def reap(self, lease: Lease) -> bool:
        """A dead owner's (or an abandoned) instance, by the name in its lease, with the binary and
        config dir its owner used."""
        options = ApptainerOptions.model_validate(lease.options) if lease.options else ApptainerOptions()
        config_dir = config_dir_of(options, Path(lease.private_dir).parent)
        name = lease.instance or instance_name(lease.sandbox_id, lease.owner)  # a lease written before the start
        binary = shutil.which(options.binary)
        if binary is None:
            log.warning("cannot reap apptainer instance %s: %r is not on PATH", name, options.binary)
            return True
        killed = lease.abandoned is not None and await asyncio.to_thread(kill_master, name)
        result, out = await stop(name, binary, host_env(os.environ, config_dir), STOP_TIMEOUT_S)
        if result is StopResult.FAILED:
            log.warning("could not stop apptainer instance %s: %s", name, out)
            return False
        late = lease.abandoned is not None and time.time() - lease.abandoned < ABANDONED_GRACE_S
        if result is StopResult.MISSING and late and not killed:
            return False  # it may still register: look again next round
        await asyncio.to_thread(remove_instance_files, config_dir, name)
        return True
