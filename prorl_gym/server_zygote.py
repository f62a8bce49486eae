# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""One pre-imported interpreter per machine (and venv) that forks the servers of every stack.

A server's process imports ~2 CPU-s of libraries before it serves (wandb and pandas through NeMo
Gym's config module, openai, FastAPI, aiohttp, Hydra, numpy, ...), and a stack of four environments
runs nine such servers on two cores: most of its start-up. The supervisor (supervise.py) asks this
zygote to fork its child instead of spawning a fresh interpreter: the libraries are imported once,
and every server shares their pages until it writes them.

Only third-party libraries are preloaded (PRELOAD), none that reads the stack's configuration at
import: NeMo Gym, Ray and prorl-gym itself are imported by each server, after the fork, with its own
environment, working directory and argv, so a server forked here runs as `python app.py` would.

    supervisor --(argv, cwd, env + its stdin/out/err over SCM_RIGHTS)--> zygote --fork--> server
    supervisor <--{"pid"}, later {"exit": code}-- zygote

The connection stays open while the server lives: the supervisor learns its exit code there, and
a supervisor that dies (even by SIGKILL) closes it, on which the zygote sends the server SIGTERM
(what PR_SET_PDEATHSIG does for a spawned child). The zygote exits once it has served no server
for IDLE_EXIT_S. Anything that goes wrong on the way (no zygote can start, a threaded preload)
makes `fork_server` return None and the supervisor spawns its child as before.

    PRORL_SERVER_ZYGOTE=0    spawn every server (no zygote)
    PRORL_SERVER_ZYGOTE=1    use one inside a Slurm job too (off there by default: a job's processes
                             stay in its step's process tree, which is what Slurm tracks without
                             cgroups; with it, the job's own zygote, keyed by SLURM_JOB_ID)

Standard library only at module level: the supervisor imports this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

PRELOAD = (
    "wandb",
    "pandas",
    "pyarrow",
    "openai",
    "fastapi",
    "starlette",
    "uvicorn",
    "httptools",
    "aiohttp",
    "pydantic",
    "hydra",
    "omegaconf",
    "numpy",
    "rich",
    "jinja2",
    "httpx",
    "yaml",
    "orjson",
)
PRELOAD_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}
IDLE_EXIT_S = 30.0
START_TIMEOUT_S = 60.0
MAX_REQUEST = 1 << 20


def socket_path() -> str:
    """This interpreter's zygote (same executable, prefix, preload and this file: the same imports and
    protocol; within a Slurm job, the job's own, which ends with it)."""
    this = os.stat(__file__).st_mtime_ns
    job = os.environ.get("SLURM_JOB_ID", "")
    key = hashlib.sha256(f"{sys.executable}|{sys.prefix}|{sys.version}|{PRELOAD}|{this}|{job}".encode())
    key = key.hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"prorl-server-zygote-{os.getuid()}-{key}.sock")


# ---------------------------------------------------------------------------- the supervisor's side


class ZygoteChild:
    """A server forked by the zygote, as the supervisor holds it (the part of Popen it uses)."""

    def __init__(self, conn: socket.socket, pid: int):
        self._conn, self.pid = conn, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def wait(self) -> int:
        """Its exit code, as the zygote reaps it; -1 where the zygote went away first (the server is then
        waited for through a pidfd)."""
        if self.returncode is not None:
            return self.returncode
        try:
            reply = self._conn.recv(4096)
            code = int(json.loads(reply)["exit"]) if reply else None
        except (OSError, ValueError, KeyError, TypeError):
            code = None
        if code is None:
            with contextlib.suppress(OSError):  # gone already: ProcessLookupError
                pidfd = os.pidfd_open(self.pid)
                try:
                    _wait_readable(pidfd)
                finally:
                    os.close(pidfd)
            code = -1
        self._conn.close()
        self.returncode = code
        return code


def _wait_readable(fd: int) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not selector.select():
            pass


def fork_server(argv: list[str], env: dict[str, str]) -> ZygoteChild | None:
    """The server `argv` (`python app.py ...`, in this directory, with `env` and our stdio) forked by this
    machine's zygote, started first if none runs; None where that cannot be (the caller spawns it)."""
    choice = os.environ.get("PRORL_SERVER_ZYGOTE", "")
    if choice == "0" or argv[0] != sys.executable:
        return None
    if os.environ.get("SLURM_JOB_ID") and choice != "1":  # a job's processes stay in its step's tree
        return None
    path = socket_path()
    if len(path.encode()) >= 100:  # a Unix socket's path must be short (TMPDIR deep below)
        return None
    conn = _connect(path) or _start_and_connect(path)
    if conn is None:
        return None
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env}).encode()
    try:
        socket.send_fds(conn, [request], [0, 1, 2])
        reply = json.loads(conn.recv(4096) or b"{}")
    except (OSError, ValueError):
        conn.close()
        return None
    if "pid" not in reply:
        conn.close()
        return None
    return ZygoteChild(conn, int(reply["pid"]))


def _connect(path: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None
    return conn


def _start_and_connect(path: str) -> socket.socket | None:
    """Start the zygote (one starter at a time: a lock beside the socket) and connect to it."""
    try:
        lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (conn := _connect(path)) is not None:  # another supervisor started it meanwhile
            return conn
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead zygote's
        with open(path + ".log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "prorl_gym.server_zygote", path],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not in any stack's process group: it serves them all
                cwd="/",
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            if (conn := _connect(path)) is not None:
                return conn
            time.sleep(0.05)
        return None
    finally:
        os.close(lock)


# ---------------------------------------------------------------------------- the zygote


def serve(path: str) -> None:
    """The zygote: preload, then fork a server for each request until idle."""
    import importlib

    # Libraries that start threads of their own at import (numpy's OpenBLAS pool, pyarrow's jemalloc
    # background thread) start none: a process with threads cannot be forked safely. Servers use no
    # threaded BLAS; a server forked here computes with one BLAS thread.
    os.environ.update(PRELOAD_ENV)
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    # The preloaded objects leave every server's garbage collections: a collection writes to each object
    # it visits, which would copy the zygote's pages into every server (~60 MiB a server).
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # forking a threaded process is not safe: let supervisors spawn
        sys.exit(f"server zygote: {threads} threads after the preload; not serving")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    os.chmod(staging, 0o600)
    listener.listen(64)
    os.rename(staging, path)  # connectable only once it listens
    bound = os.stat(path).st_ino
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("listener", None))
    servers: dict[int, tuple[socket.socket, int]] = {}  # pid -> (its supervisor's connection, its pidfd)
    idle_since = time.monotonic()
    while servers or time.monotonic() - idle_since < IDLE_EXIT_S:
        for key, _ in selector.select(timeout=1.0):
            kind, pid = key.data
            if kind == "listener":
                _accept(listener, selector, servers)
            elif kind == "supervisor":  # it went away: its server goes too
                selector.unregister(key.fileobj)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            elif kind == "server":  # it exited: tell its supervisor how
                conn, pidfd = servers.pop(pid)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError, KeyError, ValueError):
                    selector.unregister(conn)
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                conn.close()
        if servers:
            idle_since = time.monotonic()
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_ino == bound:  # not a newer zygote's
            os.unlink(path)


def _accept(listener: socket.socket, selector: selectors.BaseSelector, servers: dict) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(5.0)
        message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
        request = json.loads(message)
        argv, cwd, env = list(request["argv"]), str(request["cwd"]), dict(request["env"])
        if len(fds) != 3:
            raise ValueError("three descriptors (stdin, stdout, stderr) expected")
    except (OSError, ValueError, KeyError, TypeError):
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for key in list(selector.get_map().values()):
            with contextlib.suppress(OSError):
                os.close(key.fd)
        for other, pidfd in servers.values():
            with contextlib.suppress(OSError):
                other.close()
                os.close(pidfd)
        conn.close()
        with contextlib.suppress(OSError):
            os.close(selector.fileno())
        _become(argv, cwd, env, fds)
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    pidfd = os.pidfd_open(pid)
    servers[pid] = (conn, pidfd)
    selector.register(pidfd, selectors.EVENT_READ, ("server", pid))
    selector.register(conn, selectors.EVENT_READ, ("supervisor", pid))
    with contextlib.suppress(OSError):
        conn.send(json.dumps({"pid": pid}).encode())


def _become(argv: list[str], cwd: str, env: dict[str, str], fds: list[int]) -> None:
    """In the forked child: the server `argv` would have been, then exit with its code."""
    import atexit
    import runpy
    import traceback

    code = 1
    try:
        os.setpgid(0, 0)  # its own process group, as a spawned server's (supervise.py)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = argv[1:]
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        if "numpy" in sys.modules:  # its global generator would otherwise be the same in every server
            sys.modules["numpy"].random.seed()
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, exit 1
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
