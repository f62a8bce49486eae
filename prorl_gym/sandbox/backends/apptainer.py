# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `apptainer` backend: sandboxes as Apptainer (or SingularityCE) instances, for HPC.

The shape of bwrap.py: one long-lived instance per sandbox holds the namespaces (its pid 1
is Apptainer's init, which the sandbox cannot kill), and each runtime process (pty bash,
IPython kernel, file shell) joins it with one long-lived `apptainer exec instance://<name>`.
Our own command lines, not spython's: it runs `singularity --version` before every call,
hard-codes the binary, drops contain=True and exits the process on a missing bind path.

Inside: the image under a tmpfs overlay (--writable-tmpfs: installs work, and go with the
instance; its size is the site's `sessiondir max size`) and, of the host, only:
  <private>/workspace -> spec.workspace   read-write, on disk (not in the small overlay)
  <private>/work      -> /tmp, /var/tmp   (--workdir), same reason
  <private>/run       -> <private>/run    kernel sockets: the connection file names this path
  python_dirs(kernel_python), read-only as in bwrap (nothing to bind: the image's interpreter)
  spec.binds
--containall skips the site's `bind path`s (Apptainer adds only /etc/localtime and a localhost
/etc/hosts); no home; no network unless asked. Environment: --cleanenv and --env, except HOME
(Apptainer refuses it from --env: `env` sets it inside) and PATH (the image's own, e.g. its
conda env, unless spec.env sets it). Instance names carry owner_id(), so stopping or reaping
never touches another job's instances.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from prorl_gym.sandbox.backends.base import private_dir_of
from prorl_gym.sandbox.backends.bwrap import python_dirs
from prorl_gym.sandbox.errors import SandboxStartError
from prorl_gym.sandbox.limits import ulimit_command
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import SANDBOX_ENV, BackendOptions, SandboxSpec

if TYPE_CHECKING:
    from prorl_gym.sandbox.leases import Lease

log = logging.getLogger(__name__)
INSTALL_HINT = "the apptainer backend needs Apptainer on PATH (`module load apptainer` on most clusters, or the \
`apptainer` package), or SingularityCE with apptainer.binary: singularity"
PULL_HINT = "pre-pull images on a node with network (e.g. a login node): python -m prorl_gym.sandbox.apptainer_pull <dataset.jsonl>"
STOP_TIMEOUT_S = 30.0
MAX_NAME = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # Apptainer's instance names: ^[a-zA-Z0-9._-]+$ (so no glob either)
# Set by the shell driver at spawn time (its prompt marker). Apptainer never passes a host PS1
# into the container (its action script resets it), only <PREFIX>ENV_PS1.
FORWARD = ("PS1", "PS2")
# Of the server's environment, only what the apptainer binary itself needs: no APPTAINER_BIND or
# APPTAINERENV_* a module file may set (they would add binds or variables to every sandbox).
HOST_KEYS = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
) + tuple(f"{tool}_{name}" for tool in ("APPTAINER", "SINGULARITY") for name in ("CACHEDIR", "TMPDIR", "CONFIGDIR"))
PROXY_KEYS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


class ApptainerError(SandboxStartError):
    pass


class ApptainerOptions(BackendOptions):
    kind: Literal["apptainer"] = "apptainer"
    binary: str = "apptainer"  # or "singularity" (SingularityCE / older clusters)
    fakeroot: bool = False  # --fakeroot: root inside, the user outside (needs subuid or user namespaces)
    cache_dir: str | None = (
        None  # where pulled .sif images are kept (default: $APPTAINER_CACHEDIR or ~/.apptainer/cache)
    )
    extra_args: tuple[str, ...] = ()  # appended to `instance start`


# ---------------------------------------------------------------- pure command builders (unit-tested)


def instance_name(sandbox_id: str, owner: str | None = None) -> str:
    raw = f"prorl-{owner or owner_id()}-{sandbox_id}"
    name = _UNSAFE.sub("-", raw)
    if len(name) > MAX_NAME:  # still unique: the hash covers the full name
        name = f"{name[: MAX_NAME - 11]}-{hashlib.sha256(raw.encode()).hexdigest()[:10]}"
    return name


def host_env(environ: Mapping[str, str], proxies: bool = False) -> dict[str, str]:
    keys = HOST_KEYS + (PROXY_KEYS if proxies else ())
    return {key: value for key, value in environ.items() if key in keys}


def _bind(src: str | Path, dst: str | Path, writable: bool) -> list[str]:
    if any(sep in str(path) for path in (src, dst) for sep in ",:"):  # --bind's own separators
        raise ApptainerError(f"apptainer cannot bind a path containing ',' or ':': {src} -> {dst}")
    return ["--bind", f"{src}:{dst}:{'rw' if writable else 'ro'}"]


def instance_start_argv(
    spec: SandboxSpec, name: str, private_dir: Path, image: str, binary: str | None = None
) -> list[str]:
    run = private_dir / "run"
    argv = [binary or spec.backend.binary, "instance", "start", "--containall", "--no-home", "--writable-tmpfs"]
    argv += ["--workdir", str(private_dir / "work")]
    if not spec.network:
        argv += ["--net", "--network", "none"]
    if spec.backend.fakeroot:
        argv.append("--fakeroot")
    control = private_dir / "ctl"  # kernel connection files: read-only inside
    argv += (
        _bind(private_dir / "workspace", spec.workspace, True) + _bind(run, run, True) + _bind(control, control, False)
    )
    for path in python_dirs(spec.kernel_python):  # one not on this host is the image's own
        argv += _bind(path, path, False) if os.path.isdir(path) else []
    for bind in spec.binds:
        argv += _bind(bind.src, bind.dst or bind.src, bind.writable)
    return argv + list(spec.backend.extra_args) + [image, name]


def container_env(spec: SandboxSpec) -> dict[str, str]:
    """What --env passes (HOME aside): bwrap's allow-list, PATH only if spec.env sets it."""
    env = {"TMPDIR": "/tmp", **SANDBOX_ENV}
    return {key: value for key, value in (env | spec.env).items() if key != "HOME"}


def _env_arg(key: str, value: str) -> str:
    pair = f"{key}={value}"  # --env is pflag's key=value map: one '=' is taken whole, more are CSV
    return pair if pair.count("=") == 1 or not re.search('[,"]', pair) else '"' + pair.replace('"', '""') + '"'


def exec_prefix(spec: SandboxSpec, name: str, binary: str | None = None) -> list[str]:
    argv = [binary or spec.backend.binary, "--quiet", "exec", "--cleanenv", "--pwd", spec.workspace]
    for key, value in container_env(spec).items():
        argv += ["--env", _env_arg(key, value)]
    return argv + [f"instance://{name}", "/usr/bin/env", f"HOME={spec.env.get('HOME', spec.workspace)}"]


def forward_script(binary: str) -> str:
    """sh for a shell's join: pass FORWARD in as <PREFIX>ENV_<var>, then `env -i` the rest."""
    # SingularityCE reads SINGULARITYENV_; Apptainer (also when installed as `singularity`) APPTAINERENV_.
    prefix = "SINGULARITYENV_" if Path(os.path.realpath(binary)).name.startswith("singularity") else "APPTAINERENV_"
    return "exec /usr/bin/env -i " + "".join(f'"{prefix}{var}=${var}" ' for var in FORWARD) + '"$@"'


def join_argv(
    spec: SandboxSpec, name: str, host: dict[str, str], binary: str | None = None, shell: bool = False
) -> list[str]:
    """The host command line before argv: `apptainer exec` with only the host environment the
    binary needs (the spawn environment is the driver's, meant for inside); for a shell, a tiny
    sh first forwards its prompt variables."""
    binary = binary or spec.backend.binary
    pairs = [f"{key}={value}" for key, value in host.items()]
    head = ["/bin/sh", "-c", forward_script(binary), "prorl-apptainer-exec"] if shell else ["/usr/bin/env", "-i"]
    return head + pairs + exec_prefix(spec, name, binary)


def limits_prefix(spec: SandboxSpec) -> list[str]:
    """The rlimits, set inside. Not prlimit before `apptainer exec`: there RLIMIT_NPROC would
    count every task of the user on the node (each exec is a multi-threaded Go process)."""
    ulimit = ulimit_command(spec.limits)
    return ["bash", "-c", f'{ulimit} && exec "$@"', "prorl-limits"] if ulimit else []


def instance_stop_argv(name: str, binary: str = "apptainer") -> list[str]:
    return [binary, "instance", "stop", "--force", name]  # --force: SIGKILL, as bwrap's close


def sif_path(uri: str, cache_dir: str | Path | None = None) -> Path:
    """<cache_dir>/<sanitised uri>.sif; by default in Apptainer's cache dir, beside its own layout."""
    name = _UNSAFE.sub("_", uri.replace("://", "_")).strip("._") or "image"
    if len(name) > 200:
        name = f"{name[:189]}-{hashlib.sha256(uri.encode()).hexdigest()[:10]}"
    cache = os.environ.get("APPTAINER_CACHEDIR") or os.environ.get("SINGULARITY_CACHEDIR") or "~/.apptainer/cache"
    return (Path(cache_dir) if cache_dir else Path(cache) / "prorl-sif").expanduser() / f"{name}.sif"


def pull_argv(uri: str, dest: str | Path, binary: str = "apptainer") -> list[str]:
    return [binary, "pull", str(dest), uri]


async def _run(
    argv: list[str], timeout: float | None, env: dict[str, str], log_path: Path | None = None
) -> tuple[int, str]:
    """(exit code, output tail). `instance start` logs to a file: its instance could hold a pipe open."""
    sink = open(log_path, "ab") if log_path else asyncio.subprocess.PIPE  # noqa: SIM115
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    finally:
        if log_path:
            sink.close()
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise ApptainerError(f"`{' '.join(argv[:3])} ...` timed out after {timeout}s") from None
    text = await asyncio.to_thread(log_path.read_text, errors="replace") if log_path else out.decode(errors="replace")
    return proc.returncode, text[-2000:]


_pull_locks: dict[Path, asyncio.Lock] = {}


async def pull_image(
    uri: str, cache_dir: str | Path | None = None, binary: str = "apptainer", timeout: float | None = None
) -> Path:
    """The cached .sif of a docker://, oras://, library:// ... `uri`, pulled first if absent."""
    dest = sif_path(uri, cache_dir)
    async with _pull_locks.setdefault(dest, asyncio.Lock()):  # one pull per image per process
        if dest.exists():
            return dest
        if shutil.which(binary) is None:
            raise ApptainerError(f"{binary!r} not found to pull {uri}: {INSTALL_HINT}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.stem}.{os.getpid()}.tmp.sif")  # concurrent pullers never see half a file
        log.info("pulling %s to %s", uri, dest)
        code, out = await _run(pull_argv(uri, tmp, binary), timeout, host_env(os.environ, proxies=True))
        if code != 0:
            tmp.unlink(missing_ok=True)
            raise ApptainerError(f"{binary} pull {uri} failed (exit {code}): {out}\n{PULL_HINT}")
        os.replace(tmp, dest)
    return dest


async def _stop(name: str, binary: str) -> None:
    try:
        code, out = await _run(instance_stop_argv(name, binary), STOP_TIMEOUT_S, host_env(os.environ))
    except (OSError, ApptainerError) as exc:
        code, out = -1, str(exc)
    if code != 0 and "no instance found" not in out.lower():
        log.warning("could not stop apptainer instance %s (exit %s): %s", name, code, out)


# ---------------------------------------------------------------- placement and backend


class ApptainerPlacement:
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec, binary: str):
        self.sandbox_id = sandbox_id
        self.private_dir = private_dir
        self.workspace = spec.workspace
        self.socket_dir = private_dir / "run"
        self.control_dir = private_dir / "ctl"
        self.log_dir = private_dir  # not mounted: the sandbox cannot plant a link here
        self.sandbox_uid: int | None = None  # the sandbox runs as the server's user (never as root)
        self.spawn_fds: dict[int, int] = {}
        self.init_pid: int | None = None  # kernels join through `apptainer exec`, not a zygote
        self.own_pid_namespace = True  # --containall
        self.rlimits: dict[str, int | list[int]] = {}
        self.python = spec.kernel_python
        self.instance = instance_name(sandbox_id)  # recorded in the lease, for the reaper
        self.pids: list[int] = []  # nothing of ours to signal: stopping the instance ends it all
        self._spec = spec
        self._binary = binary
        self._join = join_argv(spec, self.instance, host_env(os.environ), binary)
        self._join_shell = join_argv(spec, self.instance, host_env(os.environ), binary, shell=True)
        self._started = False
        self._closed = False

    async def start(self) -> None:
        spec, image = self._spec, self._spec.image
        for sub in ("workspace", "work", "run", "ctl"):
            (self.private_dir / sub).mkdir(parents=True, exist_ok=True)
        if not image:
            raise ApptainerError("the apptainer backend needs sandbox.image: a .sif path or a docker:// URI")
        if "://" in image:  # the pre-pulled .sif; pulled here (once per image) if it is missing
            image = str(await pull_image(image, spec.backend.cache_dir, self._binary))
        elif not os.path.exists(image):
            raise ApptainerError(f"image {image} does not exist")
        argv = instance_start_argv(spec, self.instance, self.private_dir, image, self._binary)
        self._started = True
        code, out = await _run(argv, spec.start_timeout_s, host_env(os.environ), self.private_dir / "apptainer.log")
        if code != 0:
            raise ApptainerError(f"`{self._binary} instance start` failed (exit {code}): {out}")

    def wrap(self, argv: list[str]) -> list[str]:
        return self._join + limits_prefix(self._spec) + list(argv)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """As bwrap: a shell sets its limits itself with `ulimit` (one exec less per start)."""
        return self._join_shell + list(argv), ulimit_command(self._spec.limits)

    def environment(self) -> dict[str, str]:
        return {"HOME": self._spec.env.get("HOME", self.workspace), **container_env(self._spec)}

    async def close(self) -> None:
        """Stop this instance only (SIGKILL to its pid 1 ends everything in it), remove the files."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            await _stop(self.instance, self._binary)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)


def running_as_root() -> bool:  # a function: tests with a fake apptainer may run as root
    return os.geteuid() == 0


class ApptainerBackend:
    options = ApptainerOptions

    def check(self, spec: SandboxSpec) -> None:
        pass  # the image is checked at placement: a row may bring its own

    def zygote_config(self, spec: SandboxSpec) -> None:
        return None  # kernels join the instance through `apptainer exec`, each a process of its own

    async def place(self, sandbox_id: str, spec: SandboxSpec) -> ApptainerPlacement:
        binary = shutil.which(spec.backend.binary)
        if binary is None:
            raise ApptainerError(f"{spec.backend.binary!r} not found on PATH: {INSTALL_HINT}")
        if running_as_root():  # no user namespace then: the sandbox would be host root
            raise ApptainerError("refusing to run Apptainer sandboxes as root: run the server as an unprivileged user")
        private_dir = private_dir_of(spec, sandbox_id)
        private_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(private_dir, 0o700)
        placement = ApptainerPlacement(sandbox_id, private_dir, spec, binary)
        try:
            await placement.start()
        except BaseException:
            await placement.close()
            raise
        return placement

    async def reap(self, lease: Lease) -> None:
        """A dead owner's instance, by the name in its lease (which carries that owner's id)."""
        binary = shutil.which("apptainer") or shutil.which("singularity")
        # A lease written before the start has no instance yet; its name follows from the ids.
        name = lease.instance or instance_name(lease.sandbox_id, lease.owner)
        if binary:
            await _stop(name, binary)
