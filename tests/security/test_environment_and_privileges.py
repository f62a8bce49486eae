# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment of the environment and of privileges.

The server's environment variables (secrets, PYTHONPATH, VIRTUAL_ENV, HOME) must not reach
any process of the sandbox (bash, pid 1, the kernel, the file shell). Every process of the
sandbox, and the host-side halves joining it, run as the unprivileged sandbox uid with no
capabilities and no_new_privs; setuid binaries, mount and setuid(0) give no root.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from pathlib import Path

from tests.security.helpers import SANDBOX_UID, _assert_usable, _cmdline, _procs, _status

# =========================================================================== environment


async def test_server_environment_does_not_leak(make, monkeypatch):
    token = secrets.token_hex(8)
    planted = {
        f"PRORL_SEC_CANARY_{token.upper()}": f"canary-{token}",
        "PYTHONPATH": f"/srv/leak-{token}",
        "VIRTUAL_ENV": f"/srv/venv-{token}",
        "AWS_SECRET_ACCESS_KEY": f"aws-{token}",
        "OPENAI_API_KEY": f"sk-{token}",
        "HOME": "/root",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    sb = await make()
    await sb.write_file("probe.txt", "x")  # starts the file shell too

    bash_env = dict(
        line.split("=", 1) for line in (await sb.bash("env -0 | tr '\\0' '\\n'")).output.splitlines() if "=" in line
    )
    pid1_env = dict(
        line.split("=", 1)
        for line in (await sb.bash("tr '\\0' '\\n' < /proc/1/environ")).output.splitlines()
        if "=" in line
    )
    kernel_env = json.loads((await sb.python("import os, json; print(json.dumps(dict(os.environ)))")).output)
    file_shell_env = dict(
        item.split("=", 1) for item in (await sb.read_file("/proc/self/environ")).split("\0") if "=" in item
    )
    allowed = {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "TERM",
        "PAGER",
        "GIT_PAGER",
        "PYTHONUNBUFFERED",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    }
    server_bin = str(Path(sys.executable).parent)
    for where, env in (
        ("bash", bash_env),
        ("pid 1", pid1_env),
        ("kernel", kernel_env),
        ("file shell", file_shell_env),
    ):
        assert env, where
        leaked = (set(env) & set(os.environ)) - allowed
        assert not leaked, f"{where}: server variables leaked: {sorted(leaked)}"
        values = "\n".join(env.values())
        assert token not in values and token.upper() not in "".join(env), f"{where}: planted value leaked"
        assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env, where
        if "HOME" in env:
            assert env["HOME"] == sb.placement.workspace, f"{where}: HOME={env['HOME']}"
        if "PATH" in env and sb.placement.python != sys.executable:
            assert server_bin not in env["PATH"].split(":"), f"{where}: server's venv on PATH: {env['PATH']}"
    assert bash_env["HOME"] == "/workspace" and kernel_env["HOME"] == "/workspace"


# =========================================================================== privileges


async def test_sandbox_processes_are_unprivileged_on_the_host(make):
    sb = await make()
    await sb.python("1")
    await sb.write_file("probe.txt", "x")  # file shell
    inside = await sb.bash("id -u; grep NoNewPrivs /proc/self/status")
    assert inside.output.split()[0] != "0" and inside.output.endswith("NoNewPrivs:\t1\n"), inside.output
    pids = _procs(sb)
    cmds = {pid: _cmdline(pid) for pid in pids}
    assert (
        sum("repl_main" in cmd for cmd in cmds.values()) == 1  # the Python runtime (a spawned lean REPL)
        and sum("bash --noprofile" in cmd for cmd in cmds.values()) == 2
    ), cmds
    for pid in pids:
        status = _status(pid)
        if not status:
            continue  # exited meanwhile
        uids, gids = status["Uid"].split(), status["Gid"].split()
        assert uids == [str(SANDBOX_UID)] * 4 and "0" not in uids, (cmds[pid], status["Uid"])
        assert gids == [str(SANDBOX_UID)] * 4, (cmds[pid], status["Gid"])
        assert status["NoNewPrivs"] == "1", cmds[pid]
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, (cmds[pid], status["CapEff"])
    # The host-side halves (bwrap, nsenter joining the sandbox): the sandbox uid, no new privileges.
    outer = [sb.placement.holder_pid, sb._shell.pid, sb._file_shell.pid, sb._kernel.pid]
    for pid in outer:
        status = _status(pid)
        assert status["Uid"].split() == [str(SANDBOX_UID)] * 4 and status["NoNewPrivs"] == "1", (_cmdline(pid), status)


async def test_setuid_binaries_and_mount_give_no_root(make):
    sb = await make()
    result = await sb.bash(
        "ls -l /usr/bin/su | cut -c1-10; su -c id root </dev/null; echo su_rc=$?; passwd -S root </dev/null; "
        "mount -t tmpfs none /workspace; echo mount_rc=$?; "
        "python3 -c 'import os; os.setuid(0)' 2>&1 | tail -1; id -u; id -G"
    )
    lines = result.output.splitlines()
    assert lines[0] == "-rwsr-xr-x", result.output  # the setuid bit is there; it just does nothing
    assert "uid=0" not in result.output, result.output
    assert "You may not view or modify password information for root" in result.output, (
        result.output
    )  # passwd ran unprivileged
    assert not re.search(r"^su_rc=0$", result.output, re.M) and not re.search(r"^mount_rc=0$", result.output, re.M)
    assert re.search(r"^(PermissionError|OSError): \[Errno (1|22)\]", result.output, re.M), result.output
    assert lines[-2] == str(SANDBOX_UID) and "0" not in lines[-1].split(), result.output
    py = await sb.python("import os; os.setuid(0)")
    assert py.error and py.error["ename"] in ("PermissionError", "OSError"), py
    await _assert_usable(sb)
