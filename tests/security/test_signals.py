# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment of signals: killing processes outside the sandbox.

`kill -9 -1` (bash builtin, /bin/kill, from the kernel) and `kill -9 PID` with host pids
must spare the host (a canary process running as the sandbox uid), other sandboxes and the
sandbox's own pid 1; the agent's shell and kernel come back, and the result says so.
"""

from __future__ import annotations

import os
import subprocess

from tests.security.helpers import SANDBOX_UID, _alive, _assert_usable, _ns, _pid_ns


def _host_canary() -> subprocess.Popen:
    """A host process running as the sandbox uid: only the pid namespace separates it from the agent."""
    argv = ["sleep", "300"]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--", *argv]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# =========================================================================== signals


async def test_kill_all_processes_spares_host_other_sandboxes_and_pid1(make):
    canary = _host_canary()
    try:
        a, b = await make(), await make()
        init_pid, holder_pid = a.placement.init_pid, a.placement.holder_pid
        # bash's builtin kill: every process of the sandbox but pid 1 and the shell itself
        result = await a.bash("sleep 1000 & kill -9 -1; echo rc=$?")
        assert result.output.startswith("rc=0\n") and not result.shell_restarted, result  # then bash's job notice
        # an external kill takes the shell with it: the result says the shell was restarted
        result = await a.bash("/bin/kill -9 -1; echo not-reached")
        assert result.shell_restarted and "a new shell was started" in result.output, result
        assert "not-reached" not in result.output
        await _assert_usable(a)
        # from the kernel too
        py = await a.python("import os, signal; os.kill(-1, signal.SIGKILL); print('kernel survived')")
        assert py.output == "kernel survived\n", py
        result = await a.bash("echo after-kernel-kill")
        assert result.shell_restarted, result  # noticed before the command ran, or on its way out
        assert result.output == "after-kernel-kill\n" or "a new shell was started" in result.output, result
        await _assert_usable(a)

        assert _alive(init_pid) and _pid_ns(init_pid) == _ns(a), "the sandbox's pid 1 died"
        assert _alive(holder_pid)
        assert canary.poll() is None, "a host process of the sandbox uid was killed"
        result = await b.bash("echo b-alive")
        assert result.output == "b-alive\n" and not result.shell_restarted, result
    finally:
        canary.kill()
        canary.wait()


async def test_kill_host_pids_fails(make):
    canary = _host_canary()
    try:
        other = await make()
        sb = await make()
        targets = [os.getpid(), canary.pid, other.placement.init_pid, other.placement.holder_pid]
        inside = set((await sb.bash("ls /proc | grep -x '[0-9]*'")).output.split())
        result = await sb.bash(" ; ".join(f"kill -9 {pid}" for pid in targets) + "; kill -9 1; echo rc=$?")
        for pid in targets:
            if str(pid) not in inside:  # a host pid number that happens to exist inside is the sandbox's own
                assert f"({pid}) - No such process" in result.output, result.output
        assert result.output.endswith("rc=0\n"), result.output  # pid 1 of the sandbox ignores it
        assert canary.poll() is None
        assert _alive(sb.placement.init_pid) and _alive(other.placement.init_pid)
        assert (await other.bash("echo other-alive")).output == "other-alive\n"
        await _assert_usable(sb)
    finally:
        canary.kill()
        canary.wait()
