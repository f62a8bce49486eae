# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Keep a server alive: the process ng_run starts supervises the real server, its child, and
starts it again when it dies, so one server's death is not the whole stack's.

ng_run shuts every server down when one of its processes exits; here the process ng_run
watches is this small supervisor (no imports beyond the standard library, no Ray), which
does not die with the server. The child gets the same argv and environment, so it serves on
the same port; what it left (sandboxes, leases) its next incarnation reaps at start. SIGINT
and SIGTERM are passed on and end the supervision. A child that dies again and again within
`CRASH_WINDOW_S` of its start is given up on rather than restarted forever; one killed by a
signal is always started again. Given up on at start-up (it never served), the supervisor exits
with its code and ng_run reports it. Given up on after it served, the supervisor answers on the
server's address itself, every request with a 503 `server_gave_up`, until it is stopped: the
other servers of the stack go on, and whoever waits for this one (the agent's retries) learns at
once that it is not coming back. (The child tells the supervisor its address at start.)

    PRORL_SUPERVISE=0           run the server in this process, unsupervised
    PRORL_RESTART_DELAY_S=N     wait N seconds before starting a dead server again (default 0.5;
                                doubling, up to 10 s, while it crash-loops)
    PRORL_CRASH_WINDOW_S=N      a death within N seconds of a start is a crash (default 30)
    PRORL_SERVER_ZYGOTE=0       spawn the child (default: forked by the machine's pre-imported server
                                zygote, server_zygote.py: the libraries every server imports, once)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer

from prorl_gym.server_zygote import ZygoteChild, fork_server

CHILD_VAR = "PRORL_SUPERVISED_CHILD"  # set in the child: it runs the server itself
ADDRESS_VAR = "PRORL_SUPERVISOR_ADDRESS_FILE"  # where the child writes "host port" at start
GAVE_UP_ERROR = "server_gave_up"  # the error.type of the 503 a given-up server's address answers
CRASH_WINDOW_S = 30.0  # a child that dies sooner than this after its start "crash-loops"
MAX_QUICK_DEATHS = 5
PR_SET_PDEATHSIG = 1
log = logging.getLogger("prorl_gym.supervise")


def supervise_early(module_name: str) -> None:
    """First thing in a server's app.py: when ng_run runs it (`__main__`), this process becomes the
    supervisor before the server's own imports, and only its child imports the server (NeMo Gym,
    Ray, the model stack: ~150 MiB and 1-3 CPU-s a process). `supervised()` below then finds itself
    in the child. A server without this line is supervised all the same, by a heavier process."""
    if module_name == "__main__" and not (os.environ.get(CHILD_VAR) or os.environ.get("PRORL_SUPERVISE") == "0"):
        sys.exit(Supervisor([sys.executable, *sys.argv]).run())


def supervised(run: Callable[[], object], address: Callable[[], tuple[str, int]] | None = None) -> object:
    """Run `run` (the server) here if this is the child or supervision is off; else supervise a child.
    `address`: where the server listens (told to the supervisor, which answers there if it gives up)."""
    if os.environ.get(CHILD_VAR) or os.environ.get("PRORL_SUPERVISE") == "0":
        if address is not None and (path := os.environ.get(ADDRESS_VAR)):
            host, port = address()
            with open(path, "w") as f:
                f.write(f"{host} {port}")
        return run()
    sys.exit(Supervisor([sys.executable, *sys.argv]).run())


def child_pid_file(supervisor_pid: int) -> str:
    """Where a supervisor keeps its server's pid: a zygote-forked server is not its child, and whoever
    measures a stack by its process tree (benchmarks/cpu.py) finds it here."""
    return os.path.join(tempfile.gettempdir(), f"prorl-supervisor-{supervisor_pid}.child")


def read_child_pid(supervisor_pid: int) -> int | None:
    """The pid of the server `supervisor_pid` supervises now; None if it is no supervisor (or between two)."""
    try:
        with open(child_pid_file(supervisor_pid)) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _write_child_pid(pid: int) -> None:
    path = child_pid_file(os.getpid())
    with open(f"{path}.tmp", "w") as f:
        f.write(str(pid))
    os.replace(f"{path}.tmp", path)


def _end_with_parent() -> None:
    """In the child, before exec: SIGTERM when the supervisor dies (even by SIGKILL), never an orphan
    server holding the port. The supervisor has no threads, so a preexec_fn is safe here."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    def __init__(self, argv: list[str]):
        self.argv = argv
        self.child: subprocess.Popen | ZygoteChild | None = None
        self.stopping = False
        fd, self.address_file = tempfile.mkstemp(prefix="prorl-supervised-", suffix=".address")
        os.close(fd)

    def _forward(self, signum: int, _frame) -> None:
        """Pass the first stop signal on; not a second one (ng_run and a Ctrl-C may both send one):
        to uvicorn a second SIGINT means exit at once, skipping the release of the sandboxes."""
        if self.stopping:
            return
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self) -> int:
        logging.basicConfig(level=logging.INFO, format="[supervisor %(process)d] %(message)s")
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._forward)
        try:
            return self._supervise()
        finally:
            os.unlink(self.address_file)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(child_pid_file(os.getpid()))

    def _supervise(self) -> int:
        restart_delay = float(os.environ.get("PRORL_RESTART_DELAY_S", 0.5))
        crash_window_s = float(os.environ.get("PRORL_CRASH_WINDOW_S", CRASH_WINDOW_S))
        quick_deaths, delay, served = 0, restart_delay, False
        while True:
            started = time.monotonic()
            # Its own process group: a Ctrl-C or killpg meant for the stack reaches it once, through us
            # (a second SIGINT would make uvicorn skip its shutdown, and the sandboxes' release).
            env = os.environ | {CHILD_VAR: "1", ADDRESS_VAR: self.address_file}
            # Forked by the machine's pre-imported server zygote where it can be (server_zygote.py),
            # else spawned (the same argv, environment, stdio, process group and death with us).
            self.child = fork_server(self.argv, env) or subprocess.Popen(
                self.argv, env=env, preexec_fn=_end_with_parent, process_group=0
            )
            _write_child_pid(self.child.pid)
            log.info("server started (pid %d)", self.child.pid)
            code = self._wait()
            if self.stopping:
                return code
            lived = time.monotonic() - started
            served = served or lived >= crash_window_s
            # A crash loop is the server failing by itself (an exit code) soon after each start; a
            # server killed by a signal from outside, however often, is just started again.
            quick_deaths = quick_deaths + 1 if lived < crash_window_s and code > 0 else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                log.error("server died %d times within %.0fs of starting: giving up", quick_deaths, crash_window_s)
                if served and (address := self._address()) is not None:
                    self._answer_gone(*address, f"the server died {quick_deaths} times in a row and was given up on")
                return code or 1
            delay = min(delay * 2, 10.0) if quick_deaths else restart_delay
            pid = self.child.pid
            log.warning("server (pid %d) died with %s after %.1fs; starting again in %.1fs", pid, code, lived, delay)
            time.sleep(delay)
            if self.stopping:
                return code

    def _address(self) -> tuple[str, int] | None:
        try:
            with open(self.address_file) as f:
                host, port = f.read().split()
            return host, int(port)
        except (OSError, ValueError):
            return None

    def _answer_gone(self, host: str, port: int, reason: str) -> None:
        """Answer every request on the server's address with a 503 that says so, until stopped."""
        body = json.dumps({"error": {"type": GAVE_UP_ERROR, "message": reason}}).encode()

        class Gone(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.send_response(503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

            def log_message(self, *args) -> None:
                pass

        try:
            server = HTTPServer((host, port), Gone)
        except OSError as exc:
            log.error("could not answer on %s:%d for the given-up server: %s", host, port, exc)
            return
        server.timeout = 0.5
        log.error("answering on %s:%d that the server is down for good", host, port)
        with server:
            while not self.stopping:
                server.handle_request()

    def _wait(self) -> int:
        while True:
            try:
                return self.child.wait()
            except InterruptedError:  # a signal we forwarded: keep waiting for the child to end
                continue
