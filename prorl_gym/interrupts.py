# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Stop signals for commands that start processes: Ctrl-C, SIGTERM and SIGHUP all stop in order.

A command that started a stack (the policy, Ray, ng_run and its servers, their sandboxes) must stop
it however it is asked to end: Ctrl-C (SIGINT), `kill`, `timeout`, a CI runner or a job scheduler
(SIGTERM), a closed terminal or ssh session (SIGHUP). Inside `stop_signals()` the first of them
raises `Stopped`, a KeyboardInterrupt, in the main thread, so every `finally` and `with` on the way
out runs; later ones are said and otherwise ignored, and `holding()` ignores them the same way while a
teardown runs, so a second Ctrl-C or a scheduler's repeated SIGTERM never aborts a teardown half way.

SIGHUP keeps an ignored disposition (`nohup make eval ...` must survive its terminal). SIGINT is
handled even where it was ignored (a command started in the background of a script): the children
started while the handler is installed then get the default disposition back at exec, so the SIGINT
that stops ng_run in order reaches it.

GNU make does not pass a SIGTERM it gets on to its recipe (`kill <make's pid>` orphans the command,
which goes on running); `follow_make()` has the kernel send the command SIGTERM when make goes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


class Stopped(KeyboardInterrupt):
    """The command was asked to stop by a signal; `exit_code` is the shell's convention (128 + signal)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """The state of one `stop_signals()` block: whether a stop is under way."""

    def __init__(self) -> None:
        self.stopping = False

    def handle(self, signum: int, frame: object) -> None:
        if self.stopping:
            name = signal.Signals(signum).name
            print(f"[stop] {name}: already stopping everything that was started; please wait", file=sys.stderr)
            return
        self.stopping = True
        raise Stopped(signum)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """A teardown: a stop signal that comes meanwhile is said, never raised into it."""
        before, self.stopping = self.stopping, True
        try:
            yield
        finally:
            self.stopping = before


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """Handle the stop signals as the module docstring says, for the block (main thread only: elsewhere
    signals cannot be handled, and the block runs as is); the previous handlers come back after it."""
    state = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = {}
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, state.handle)
    try:
        yield state
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def say_stopped(exc: KeyboardInterrupt) -> int:
    """Say on stderr that the command stopped, and return its exit code (130 for a plain Ctrl-C)."""
    code = exc.exit_code if isinstance(exc, Stopped) else 128 + signal.SIGINT
    name = signal.Signals(code - 128).name
    print(f"stopped ({name}); everything the command started was stopped", file=sys.stderr)
    return code


def follow_make() -> None:
    """Run by make (`make eval`, `make demo`): a SIGTERM when make exits, as if make had passed it on."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm") as f:
            if f.read().strip() not in ("make", "gmake"):
                return
    except OSError:
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # make went before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
