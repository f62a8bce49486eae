# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Apptainer's command line as the apptainer backend drives it: pure command builders, the
runs, and the instance state files. Flags need Apptainer >= 1.1 or SingularityCE >= 3.10
(`--no-eval`); what each choice avoids is from Apptainer 1.3/1.4's own source:

- XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS never reach the binary. With both, Apptainer
  1.4 puts each rootless instance, and each join, in a systemd user scope over D-Bus: outside
  the Slurm job's cgroup (its limits and `scancel` miss it), and concurrent starts fail at
  random with "failed to connect to dbus" (apptainer#3607).
- APPTAINER_CONFIGDIR is ours for start, exec and stop (a directory under the sandbox root):
  the instance's state file, read by every join, and its .out/.err logs, which Apptainer never
  deletes, stay on node-local disk and go with the sandbox, not into a quota'd NFS home. Never
  for pull: registry logins live in the user's own config dir.
- The sandbox's environment is a 0600 --env-file read with --no-eval: values stay out of `ps`
  and are not shell-evaluated a second time inside ($, quotes, newlines stay literal).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import json
import os
import re
import shlex
import signal
from collections.abc import Mapping
from pathlib import Path

from prorl_gym.sandbox.backends.inside import python_dirs
from prorl_gym.sandbox.errors import SandboxStartError
from prorl_gym.sandbox.limits import ulimit_command
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import ResourceLimits, SandboxSpec

MAX_NAME = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # Apptainer's instance names: ^[a-zA-Z0-9._-]+$ (so no glob either)
TOOLS = ("APPTAINER", "SINGULARITY")
# Of the server's environment, only what the binary itself needs: no APPTAINER_BIND or
# APPTAINERENV_* a module file may set (they would add binds or variables to every sandbox),
# and none of XDG_RUNTIME_DIR / DBUS_SESSION_BUS_ADDRESS (see above).
HOST_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR") + tuple(
    f"{tool}_{name}" for tool in TOOLS for name in ("CACHEDIR", "TMPDIR")
)
PROXY_KEYS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# Pulls only, never a sandbox: registry credentials (anonymous pulls of thousands of images hit
# rate limits) and the user's config dir, where `registry login` keeps its logins.
REGISTRY_KEYS = (
    "APPTAINER_DOCKER_USERNAME",
    "APPTAINER_DOCKER_PASSWORD",
    "APPTAINER_AUTH_FILE",
    "SINGULARITY_DOCKER_USERNAME",
    "SINGULARITY_DOCKER_PASSWORD",
    "SINGULARITY_AUTHFILE",
    "APPTAINER_CONFIGDIR",
    "SINGULARITY_CONFIGDIR",
)
# Set by the shell driver at spawn time (its prompt marker). Apptainer never passes a host PS1
# into the container (its action script resets it), only <PREFIX>ENV_PS1.
FORWARD = ("PS1", "PS2")
# Apptainer drops these from an --env-file silently (its shell's read-only variables).
READ_ONLY_ENV = frozenset({"EUID", "GID", "HOME", "IFS", "OPTIND", "PWD", "UID"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


INSTALL_HINT = (
    "the apptainer backend needs Apptainer on PATH (`module load apptainer` on most clusters, or the "
    "`apptainer` package), or SingularityCE with apptainer.binary: singularity"
)


class ApptainerError(SandboxStartError):
    pass


class ApptainerTimeout(ApptainerError):
    pass


class StopResult(enum.Enum):
    STOPPED = "stopped"
    MISSING = "missing"  # no such instance (never registered, or already gone)
    FAILED = "failed"


def is_singularityce(binary: str) -> bool:
    """SingularityCE, not Apptainer installed under the name `singularity` (a link to apptainer)."""
    return Path(os.path.realpath(binary)).name.startswith("singularity")


def instance_name(sandbox_id: str, owner: str | None = None) -> str:
    raw = f"prorl-{owner or owner_id()}-{sandbox_id}"
    name = _UNSAFE.sub("-", raw)
    if len(name) > MAX_NAME:  # still unique: the hash covers the full name
        name = f"{name[: MAX_NAME - 11]}-{hashlib.sha256(raw.encode()).hexdigest()[:10]}"
    return name


def host_env(environ: Mapping[str, str], config_dir: str | Path | None = None) -> dict[str, str]:
    """The environment of `instance start`, `exec` and `instance stop` (all three must agree)."""
    env = {key: value for key, value in environ.items() if key in HOST_KEYS}
    if config_dir is not None:
        env |= {f"{tool}_CONFIGDIR": str(config_dir) for tool in TOOLS}
    return env


def pull_env(environ: Mapping[str, str]) -> dict[str, str]:
    keys = HOST_KEYS + PROXY_KEYS + REGISTRY_KEYS
    return {key: value for key, value in environ.items() if key in keys}


def _bind(src: str | Path, dst: str | Path, writable: bool) -> list[str]:
    if any(sep in str(path) for path in (src, dst) for sep in ",:"):  # --bind's own separators
        raise ApptainerError(f"apptainer cannot bind a path containing ',' or ':': {src} -> {dst}")
    return ["--bind", f"{src}:{dst}:{'rw' if writable else 'ro'}"]


def _network(spec: SandboxSpec) -> list[str]:
    return [] if spec.network else ["--net", "--network", "none"]


def copies_dir(private_dir: Path, index: int) -> Path:
    return private_dir / "copies" / str(index)


def instance_start_argv(
    spec: SandboxSpec, name: str, private_dir: Path, image: str, binary: str | None = None, overlay: str | None = None
) -> list[str]:
    options = spec.backend
    binary = binary or options.binary
    argv = [binary, "instance", "start", "--containall", "--no-home"]
    # A writable --overlay and --writable-tmpfs are mutually exclusive (Apptainer refuses both).
    if (overlay or options.overlay) == "dir":
        argv += ["--overlay", str(private_dir / "overlay")]
    else:
        argv.append("--writable-tmpfs")
    argv += ["--workdir", str(private_dir / "work")] + _network(spec)
    if options.fakeroot:  # without the flag, a host libfakeroot is preloaded into every joined process
        argv += ["--fakeroot"] if is_singularityce(binary) else ["--fakeroot", "--ignore-fakeroot-command"]
    run, control = private_dir / "run", private_dir / "ctl"  # control: kernel connection files, read-only inside
    argv += (
        _bind(private_dir / "workspace", spec.workspace, True) + _bind(run, run, True) + _bind(control, control, False)
    )
    for index, path in enumerate(options.disk_copies):
        argv += _bind(copies_dir(private_dir, index), path, True)
    for path in python_dirs(spec.kernel_python):  # one not on this host is the image's own
        argv += _bind(path, path, False) if os.path.isdir(path) else []
    for bind in spec.binds:
        argv += _bind(bind.src, bind.dst or bind.src, bind.writable)
    return argv + list(options.extra_args) + [image, name]


def copy_out_argv(spec: SandboxSpec, private_dir: Path, image: str, binary: str | None = None) -> list[str]:
    """One `exec` of the image (no instance) copying each of spec.backend.disk_copies to the
    sandbox's disk, owned by the user (an image's root-owned /testbed is read-only to us)."""
    argv = [binary or spec.backend.binary, "--quiet", "exec", "--containall", "--no-home", "--cleanenv"]
    argv += _network(spec)
    steps = []
    for index, path in enumerate(spec.backend.disk_copies):
        target = copies_dir(private_dir, index)  # at its own path, as the kernel's run dir
        argv += _bind(target, target, True)
        steps.append(f"cp -R --preserve=mode,timestamps,links {shlex.quote(path)}/. {shlex.quote(str(target))}/")
    return argv + [image, "/bin/sh", "-c", " && ".join(steps)]


def env_file_text(env: Mapping[str, str]) -> str:
    """KEY='value' lines: Apptainer evaluates the file with a shell on the host, so each value is
    quoted to stay literal there; --no-eval keeps it literal inside."""
    lines = []
    for key, value in env.items():
        if not _ENV_NAME.fullmatch(key) or key in READ_ONLY_ENV:
            raise ApptainerError(f"apptainer cannot pass the environment variable {key!r}")
        if "\0" in value:
            raise ApptainerError(f"environment variable {key} contains a NUL byte")
        lines.append(f"{key}={shlex.quote(value)}\n")
    return "".join(lines)


def write_env_file(path: Path, env: Mapping[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # spec.env may carry keys
    with os.fdopen(fd, "w") as f:
        f.write(env_file_text(env))


def exec_prefix(spec: SandboxSpec, name: str, env_file: Path, binary: str | None = None) -> list[str]:
    argv = [binary or spec.backend.binary, "--quiet", "exec", "--cleanenv", "--no-eval", "--env-file", str(env_file)]
    # Apptainer sets a join's HOME to the instance's (an unmounted host path): `env` sets ours.
    home = spec.env.get("HOME", spec.workspace)
    return argv + ["--pwd", spec.workspace, f"instance://{name}", "/usr/bin/env", f"HOME={home}"]


def forward_script(binary: str) -> str:
    """sh for a shell's join: pass FORWARD in as <PREFIX>ENV_<var>, then `env -i` the rest."""
    # SingularityCE reads SINGULARITYENV_; Apptainer (also when installed as `singularity`) APPTAINERENV_.
    prefix = "SINGULARITYENV_" if is_singularityce(binary) else "APPTAINERENV_"
    return "exec /usr/bin/env -i " + "".join(f'"{prefix}{var}=${var}" ' for var in FORWARD) + '"$@"'


def join_argv(
    spec: SandboxSpec, name: str, host: dict[str, str], env_file: Path, binary: str | None = None, shell: bool = False
) -> list[str]:
    """The host command line before argv: `apptainer exec` with only the host environment the
    binary needs (the spawn environment is the driver's, meant for inside); for a shell, a tiny
    sh first forwards its prompt variables."""
    binary = binary or spec.backend.binary
    pairs = [f"{key}={value}" for key, value in host.items()]
    head = ["/bin/sh", "-c", forward_script(binary), "prorl-apptainer-exec"] if shell else ["/usr/bin/env", "-i"]
    return head + pairs + exec_prefix(spec, name, env_file, binary)


def limits_prefix(limits: ResourceLimits) -> list[str]:
    """The rlimits, set inside. Not prlimit before `apptainer exec`: there RLIMIT_NPROC would
    count every task of the user on the node (each exec is a multi-threaded Go process)."""
    ulimit = ulimit_command(limits)
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


# ---------------------------------------------------------------- instance state (<config dir>/instances)


def instance_file(config_dir: Path, name: str) -> Path | None:
    """instances/<app|sing>/<host>/<user>/<name>/<name>.json, written once the instance is up."""
    return next(iter(config_dir.glob(f"instances/*/*/*/{name}/{name}.json")), None)


def read_instance(config_dir: Path, name: str) -> dict | None:
    path = instance_file(config_dir, name)
    try:
        return json.loads(path.read_text()) if path else None
    except (OSError, ValueError):
        return None


def remove_instance_files(config_dir: Path, name: str) -> None:
    """The .out/.err logs (Apptainer never deletes them) and a dead instance's state, if left."""
    for path in config_dir.glob(f"instances/logs/*/*/{name}.*"):
        path.unlink(missing_ok=True)
    state = instance_file(config_dir, name)
    if state is not None:
        for path in state.parent.iterdir():
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            state.parent.rmdir()


def kill_master(name: str) -> bool:
    """SIGKILL the instance's master process, found by its title `Apptainer instance: <user> [<name>]`.
    It calls setsid() while starting, so killing the CLI's process group misses it."""
    suffix = f"[{name}]".encode()
    killed = False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                title = f.read().split(b"\0", 1)[0].rstrip()
        except OSError:
            continue
        if title.startswith((b"Apptainer instance:", b"Singularity instance:")) and title.endswith(suffix):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed = True
    return killed


# ---------------------------------------------------------------- runs


async def run(
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
        raise ApptainerTimeout(f"`{' '.join(argv[:3])} ...` timed out after {timeout}s") from None
    text = await asyncio.to_thread(log_path.read_text, errors="replace") if log_path else out.decode(errors="replace")
    return proc.returncode, text[-2000:]


async def stop(name: str, binary: str, env: dict[str, str], timeout: float) -> tuple[StopResult, str]:
    try:
        code, out = await run(instance_stop_argv(name, binary), timeout, env)
    except (OSError, ApptainerError) as exc:
        return StopResult.FAILED, str(exc)
    if code == 0:
        return StopResult.STOPPED, out
    # exit 1 with "no instance found": never registered, or already gone
    return (StopResult.MISSING if "no instance found" in out.lower() else StopResult.FAILED), out
