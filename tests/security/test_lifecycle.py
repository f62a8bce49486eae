# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment over a sandbox's lifecycle: nothing of it may outlive close() or a failed start.

Background, detached (setsid, nohup, double fork) and signal-ignoring processes must die at
close; a start that times out must not leave the half-started sandbox running; close() must
reap what it started, even under a server that is a subreaper and reaps nothing itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import sys

from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import SandboxSpec, SandboxStartError, create_sandbox
from tests.security.helpers import (
    LIMITS,
    _alive,
    _cmdline,
    _entry,
    _mounts_mention,
    _pids,
    _runs_code,
    _sandbox_procs,
    _wait_until,
)

# =========================================================================== leftovers at close


async def test_background_and_detached_processes_die_at_close(make):
    sb = await make()
    entry, private_dir = _entry(sb), sb.placement.private_dir
    marker = f"{secrets.randbelow(10**6) + 10**6}"
    await sb.bash(
        f"sleep {marker}.1 & setsid sleep {marker}.2 & nohup sleep {marker}.3 >/dev/null 2>&1 & (sleep {marker}.4 &); "
        f"sh -c 'trap \"\" HUP INT TERM; exec sleep {marker}.5' & disown -a; "
        f"setsid -f sh -c 'sleep {marker}.6 & exec sleep {marker}.7' >/dev/null 2>&1"
    )
    await sb.python(
        "import os, subprocess\n"
        f"subprocess.Popen(['sleep', '{marker}.8'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{marker}.9'])\n"
        "    os._exit(0)\n"
    )

    def marked() -> dict[int, str]:
        return {pid: cmd for pid in _pids() if f"sleep {marker}." in (cmd := _cmdline(pid)) and _alive(pid)}

    assert await _wait_until(lambda: len(marked()) == 9), marked()  # the test sees them all from the host
    await sb.close()
    gone = await _wait_until(lambda: not marked(), timeout=3)
    left = marked()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert gone, f"survived close: {left}"
    running = {pid: _cmdline(pid) for pid in _sandbox_procs(entry) if _runs_code(pid)}
    assert not running, f"processes of the closed sandbox still running: {running}"
    assert not private_dir.exists()


async def test_failed_start_leaves_no_sandbox_running(module_root):
    """A start that times out (a loaded host) must not leave the half-started sandbox behind.
    BwrapPlacement.start (prorl_gym/sandbox/backends/local/bwrap.py) reads bwrap's child pid, then
    waits for pid 1's "ready"; on a timeout in between it calls close() while self.init_pid
    is still -1 (it is only set after the wait), so only bwrap is killed and the sandbox's pid 1
    lives on, re-parented to the host's init, for ever. The timeout is swept around the
    shortest one that succeeds, to land between the two reads."""
    root = os.path.join(module_root, "starts")
    os.makedirs(root)
    os.chmod(root, 0o711)

    async def start(timeout: float) -> bool:
        try:
            sb = await create_sandbox(SandboxSpec(root_dir=root, limits=LIMITS, start_timeout_s=timeout))
        except SandboxStartError:
            return False
        await sb.close()
        return True

    shortest = 0.002
    while not (await start(shortest) and await start(shortest)):
        shortest *= 1.5
        assert shortest < 30, "no sandbox start succeeded"
    failed = 0
    for i in range(40):
        failed += not await start(shortest * (0.3 + 0.7 * i / 40))
    await asyncio.sleep(0.5)
    left = {
        pid: _cmdline(pid)[:60]
        for pid in _pids()
        if _runs_code(pid) and (_mounts_mention(pid, root) or root in _cmdline(pid))
    }
    for pid in left:  # ours: clean up before failing
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)
    assert failed, "no start timed out: the sweep did not exercise the failure path"
    assert not left, f"{failed} failed starts left these sandbox processes running: {left}"


SUBREAPER_SERVER = r"""
import asyncio, ctypes, json, os, signal, sys, time
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import ResourceLimits

# Like a server that is PID 1 of its container (or runs under a subreaper) and does not
# reap processes it did not start: orphans are re-parented to it and stay zombies.
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER

async def main(root):
    sb = await create_sandbox(SandboxSpec(root_dir=root, limits=ResourceLimits.model_validate_json(sys.argv[2])))
    await sb.python("1")
    await sb.write_file("x.txt", "x")  # starts the file shell
    await sb.bash("sleep 1000 &")
    init = sb.placement.init_pid
    await sb.close()
    time.sleep(2)
    me, left = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        except OSError:
            continue
        if status["PPid"].strip() == me:
            left.append(f"{pid} {status['Name'].strip()} {status['State'].strip()}")
    print(json.dumps({"init_alive": os.path.exists(f"/proc/{init}"), "left": left}), flush=True)
    signal.alarm(10)  # now reap them, so nothing of this test outlives it
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break

asyncio.run(main(sys.argv[1]))
"""


async def test_close_leaves_nothing_for_the_hosts_init_to_reap(module_root):
    """close() must reap what it started. Today the host-side nsenter of the kernel and of the
    file shell is SIGKILLed together with (or before) the process it joined to the sandbox,
    so that process dies as an orphan: it is re-parented to the host's PID 1 (or the nearest
    subreaper), and the sandbox's pid 1 waits in zap_pid_ns_processes until someone reaps
    it. Where PID 1 is the server itself (a container without an init), nobody ever does:
    every closed sandbox leaves a stuck pid 1 and zombies behind."""
    run = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SUBREAPER_SERVER,
        module_root,
        LIMITS.model_dump_json(),
        cwd=str(REPO_ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(run.communicate(), 60)
    assert run.returncode == 0, err.decode()[-2000:]
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert not report["init_alive"] and not report["left"], f"2 s after close(), left to the server to reap: {report}"
