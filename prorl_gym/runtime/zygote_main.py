# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The zygote: a pre-imported interpreter that forks one Python runtime per request.

Run by the *sandbox's* Python (`python -I zygote_main.py <fd> <runtime>`), as the sandbox uid.
runtime `ipython`: it forks IPython kernels (a fresh kernel costs ~0.7 CPU-s of imports, a
forked one ~0.06); `repl`: the lean interpreter of repl_main.py (a few CPU-ms). Standalone on
purpose (stdlib and the sandbox's own packages only): the sandbox's Python cannot import
prorl_gym.

Per request (JSON on a SOCK_SEQPACKET socket, fds by SCM_RIGHTS: two of the runtime's[, userns]):
fork an intermediate that joins the sandbox's namespaces (user first, by fd; mount last,
which also moves its root and cwd into the sandbox), forks the runtime there (the pid
namespace applies to children), reports its host pid and exits. The runtime starts its own
session, keeps only its two fds, takes the sandbox's rlimits and environment. A kernel's fds
are (log, ready): it binds its sockets and writes "bound" to ready; a REPL's are (output,
control): its stdout/stderr and its request channel. No user code ever runs outside the
sandbox, and nothing secret passes through the zygote (a kernel's connection key is read by
the kernel itself from the connection file).
"""

import ctypes
import gc
import importlib.util
import json
import logging
import os
import resource
import signal
import socket
import sys
import traceback

os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # no threads to fork
RUNTIME = sys.argv[2] if len(sys.argv) > 2 else "ipython"
REPL_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repl_main.py")
repl_main = None  # that file as a module, loaded by main() when RUNTIME is repl

PRELOAD = ("numpy", "sympy", "scipy")
# What the REPL shows values with (IPython's own pretty printer), when the sandbox has IPython.
REPL_PRELOAD = ("IPython.lib.pretty", "asyncio")
# What IPKernelApp.initialize imports lazily: imported once here, ~8 CPU-ms less per kernel.
KERNEL_LAZY_IMPORTS = (
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "faulthandler",
    "pdb",
    "tornado.platform.asyncio",
)
NAMESPACES = (
    ("ipc", 0x08000000),
    ("uts", 0x04000000),
    ("net", 0x40000000),
    ("cgroup", 0x02000000),
    ("pid", 0x20000000),
    ("mnt", 0x00020000),
)
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36
RLIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
}
libc = ctypes.CDLL(None, use_errno=True)


if RUNTIME == "ipython":
    # No debugger in a sandbox kernel: ipykernel then builds none per kernel (and lists no modules
    # for it), and debugpy/pydevd stay out of the zygote's memory, which every fork copies.
    sys.modules["debugpy"] = None

    import ipykernel.comm
    import ipykernel.ipkernel
    import ipykernel.zmqshell  # noqa: F401
    import IPython.core.completer  # noqa: F401
    from ipykernel.kernelapp import IPKernelApp
    from traitlets.config import Config

    # What the server's `ipykernel_launcher` command line says, as config: no argument parsing per
    # kernel. And no 0.5 ms sleep after each execution: ipykernel's workaround for clients that stop
    # reading at execute_reply; ours reads IOPub until the execution's idle status, after its output.
    KERNEL_CONFIG = Config(
        {
            "HistoryManager": {"enabled": False},
            "Application": {"log_level": logging.CRITICAL},
            "IPythonKernel": {"_execute_sleep": 0.0},
        }
    )

    class ZygoteKernelApp(IPKernelApp):
        """IPKernelApp configured by the zygote instead of a command line (parsing one costs a
        kernel ~3 CPU-ms), and without the `storemagic` extension (%store keeps values in the
        profile directory across sessions: nothing a sandbox kernel should have)."""

        def parse_command_line(self, argv=None):
            pass

        def init_extensions(self):
            self.default_extensions = []
            super().init_extensions()

        def init_heartbeat(self):
            """No heartbeat: the server watches a kernel's process (pidfd), it never pings it. A
            thread, and a zmq context with two threads of its own, less per kernel."""


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _reap(*_) -> None:
    """Orphaned kernels are re-parented to us (subreaper): collect them."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _join(init_pid: int, userns_fd: int) -> None:
    ns_fds = [(os.open(f"/proc/{init_pid}/ns/{name}", os.O_RDONLY), flag) for name, flag in NAMESPACES]
    _check(libc.setns(userns_fd, CLONE_NEWUSER), "setns user")  # first: it grants the rights for the rest
    for fd, flag in ns_fds:
        _check(libc.setns(fd, flag), f"setns {flag:#x}")
        os.close(fd)


def _enter(req: dict, out_fd: int, fd3: int) -> None:
    """In the sandbox: become the runtime's process, with out_fd as stdout/stderr and fd3 as fd 3."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.dup2(fd3, 3)
    os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # nothing of the zygote's stays open
    for name, value in req["rlimits"].items():
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(RLIMITS[name], (soft, hard))
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])


def _repl(req: dict, out_fd: int, control_fd: int) -> None:
    """In the sandbox: become the REPL (repl_main.serve). Never returns."""
    _enter(req, out_fd, control_fd)
    repl_main.serve(3)
    os._exit(0)


def _kernel(req: dict, log_fd: int, ready_fd: int) -> None:
    """In the sandbox: become the kernel. Never returns."""
    _enter(req, log_fd, ready_fd)
    app = ZygoteKernelApp.instance(config=KERNEL_CONFIG, connection_file=req["connection_file"])
    app.initialize([])
    os.write(3, b"bound")
    os.close(3)
    app.start()
    os._exit(0)


def _spawn(req: dict, fds: list[int], report_w: int) -> None:
    """The intermediate: join the sandbox, fork the kernel there, report its pid. Never returns."""
    try:
        first, second, *userns = fds
        if req.get("init_pid"):
            _join(req["init_pid"], userns[0])
        pid = os.fork()
        if pid == 0:
            try:
                (_repl if RUNTIME == "repl" else _kernel)(req, first, second)
            finally:  # never back into the zygote's loop: what went wrong is on its stderr (log, output)
                traceback.print_exc()
                os._exit(1)
        os.write(report_w, json.dumps({"pid": pid}).encode())
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - reported to the server as a start failure
        os.write(report_w, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        os._exit(1)


def _load_color_themes() -> None:
    """IPython reads its colour themes from JSON files on first use, in every kernel: read them once."""
    try:
        from IPython.utils import PyColorize

        for name in PyColorize._BUILTIN_THEMES:
            PyColorize.theme_table[name]
    except (ImportError, AttributeError, KeyError, ValueError):  # another IPython version: only slower
        pass


def _load_repl():
    spec = importlib.util.spec_from_file_location("prorl_repl_main", REPL_MAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    global repl_main
    channel = socket.socket(fileno=int(sys.argv[1]))
    for module in PRELOAD + (REPL_PRELOAD if RUNTIME == "repl" else KERNEL_LAZY_IMPORTS):
        try:
            __import__(module)
        except ImportError:
            pass
    if RUNTIME == "repl":
        repl_main = _load_repl()
    else:
        _load_color_themes()
    gc.collect()
    gc.freeze()  # kernels forked from here leave these objects alone when they collect: fewer pages copied
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    signal.signal(signal.SIGCHLD, _reap)
    channel.send(b'{"ready": true}')
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(channel, 1 << 20, 4)
        except InterruptedError:
            continue
        if not message:
            return  # the server closed its end: we are done
        report_r, report_w = os.pipe()
        if os.fork() == 0:
            os.close(report_r)
            _spawn(json.loads(message), fds, report_w)
        os.close(report_w)
        for fd in fds:
            os.close(fd)
        with os.fdopen(report_r, "rb") as report:
            channel.send(report.read() or b'{"error": "the spawner died"}')


if __name__ == "__main__":
    main()
