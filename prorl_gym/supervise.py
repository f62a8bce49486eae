# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Keep a server alive: the process ng_run starts supervises the real server, its child, and
starts it again when it dies, so one server's death is not the whole stack's.

ng_run shuts every server down when one of its processes exits; here the process ng_run
watches is this small supervisor (no imports beyond the standard library, no Ray), which
does not die with the server. The child gets the same argv and environment, so it serves on
the same port; what it left (sandboxes, leases) its next incarnation reaps at start. SIGINT
and SIGTERM are passed on and end the supervision. A child that dies again and again within
`CRASH_WINDOW_S` of its start is given up on (the supervisor exits with its code, and ng_run
reports it) rather than restarted forever; one killed by a signal is always started again.

    PRORL_SUPERVISE=0   run the server in this process, unsupervised
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

CHILD_VAR = "PRORL_SUPERVISED_CHILD"  # set in the child: it runs the server itself
CRASH_WINDOW_S = 30.0  # a child that dies sooner than this after its start "crash-loops"
MAX_QUICK_DEATHS = 5
PR_SET_PDEATHSIG = 1
log = logging.getLogger("prorl_gym.supervise")


def supervised(run: Callable[[], object]) -> object:
    """Run `run` (the server) here if this is the child or supervision is off; else supervise a child."""
    if os.environ.get(CHILD_VAR) or os.environ.get("PRORL_SUPERVISE") == "0":
        return run()
    sys.exit(Supervisor([sys.executable, *sys.argv]).run())


def _end_with_parent() -> None:
    """In the child, before exec: SIGTERM when the supervisor dies (even by SIGKILL), never an orphan
    server holding the port. The supervisor has no threads, so a preexec_fn is safe here."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    def __init__(self, argv: list[str]):
        self.argv = argv
        self.child: subprocess.Popen | None = None
        self.stopping = False

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
        quick_deaths, delay = 0, 0.5
        while True:
            started = time.monotonic()
            # Its own process group: a Ctrl-C or killpg meant for the stack reaches it once, through us
            # (a second SIGINT would make uvicorn skip its shutdown, and the sandboxes' release).
            self.child = subprocess.Popen(
                self.argv, env=os.environ | {CHILD_VAR: "1"}, preexec_fn=_end_with_parent, process_group=0
            )
            log.info("server started (pid %d)", self.child.pid)
            code = self._wait()
            if self.stopping:
                return code
            lived = time.monotonic() - started
            # A crash loop is the server failing by itself (an exit code) soon after each start; a
            # server killed by a signal from outside, however often, is just started again.
            quick_deaths = quick_deaths + 1 if lived < CRASH_WINDOW_S and code > 0 else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                log.error("server died %d times within %.0fs of starting: giving up", quick_deaths, CRASH_WINDOW_S)
                return code or 1
            delay = min(delay * 2, 10.0) if quick_deaths else 0.5
            pid = self.child.pid
            log.warning("server (pid %d) died with %s after %.1fs; starting again in %.1fs", pid, code, lived, delay)
            time.sleep(delay)
            if self.stopping:
                return code

    def _wait(self) -> int:
        while True:
            try:
                return self.child.wait()
            except InterruptedError:  # a signal we forwarded: keep waiting for the child to end
                continue
