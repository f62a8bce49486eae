# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment of the filesystem: reading and writing outside the sandbox.

Reading: the project checkout, a secret planted in the host's /tmp, another sandbox's
workspace (also through /proc/PID/root and /proc/PID/cwd), home directories and
/etc/shadow. Writing: system directories, the sandbox's own venv, the host directories of
another sandbox, and the paths the server itself writes or connects to (connection files,
logs, kernel sockets), where a planted symlink would make a root server write a host file.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import SandboxFileNotFound
from tests.security.helpers import FIND_RUN_DIR, _assert_usable, _procs, _sha


@pytest.fixture
def host_victim():
    """A root-only host file (0600 in a 0700 dir) that must never change."""
    directory = Path(tempfile.mkdtemp(prefix="prorl-sec-victim-", dir="/tmp"))
    victim = directory / "victim.conf"
    victim.write_text("ORIGINAL\n")
    os.chmod(victim, 0o600)
    yield victim
    shutil.rmtree(directory, ignore_errors=True)


# =========================================================================== reading outside


async def test_read_project_checkout_fails(make):
    sb = await make()
    repo = str(REPO_ROOT)
    result = await sb.bash(
        f"cat {repo}/pyproject.toml; ls {repo}/resources_servers {repo}/prorl_gym; "
        f"cat /proc/1/root{repo}/pyproject.toml; echo listing:; ls -A {repo}"
    )
    assert result.output.count("No such file or directory") == 4, result.output
    listing = result.output.split("listing:\n", 1)[1].split()
    assert set(listing) <= {".venvs", ".venv"}, f"project files visible inside: {listing}"
    py = await sb.python(
        f"import os; print(os.path.exists({repo + '/pyproject.toml'!r})); open({repo + '/pyproject.toml'!r})"
    )
    assert py.output.startswith("False\n") and py.error["ename"] == "FileNotFoundError", py
    with pytest.raises(SandboxFileNotFound):
        await sb.read_file(f"{repo}/pyproject.toml")
    await _assert_usable(sb)


async def test_read_secret_planted_in_host_tmp_fails(make):
    token = secrets.token_hex(8)
    secret = Path(f"/tmp/prorl-sec-secret-{token}")
    secret.write_text(f"SECRET-{token}\n")
    os.chmod(secret, 0o644)  # readable by anyone on the host
    try:
        sb = await make()
        result = await sb.bash(
            f"cat {secret}; cat /proc/1/root{secret}; "
            f"grep -rls -e SECRET-'{token}' /tmp /workspace /dev/shm /etc /proc/1/root/tmp; echo rc=$?"
        )
        assert f"SECRET-{token}" not in result.output, result.output
        assert result.output.count("No such file or directory") == 2, result.output
        assert result.output.endswith("rc=1\n"), result.output  # grep found nothing
        listing = await sb.bash("ls -A /tmp /proc/1/root/tmp")
        assert token not in listing.output, listing.output
        py = await sb.python(f"print(open({str(secret)!r}).read())")
        assert py.error and py.error["ename"] == "FileNotFoundError" and f"SECRET-{token}" not in py.output, py
        with pytest.raises(SandboxFileNotFound):
            await sb.read_file(str(secret))
        await _assert_usable(sb)
    finally:
        secret.unlink()


async def test_read_other_sandbox_workspace_fails(make):
    a, b = await make(), await make()
    token = secrets.token_hex(8)
    await a.bash(
        f"echo SECRET-{token} > /workspace/secret.txt; cp /workspace/secret.txt /tmp/secret.txt; cd /workspace"
    )
    a_pids = _procs(a) + [a.placement.holder_pid, a.placement.init_pid]
    assert len(a_pids) >= 4
    probes = " ".join(
        f"/proc/{pid}/root/workspace/secret.txt /proc/{pid}/root/tmp/secret.txt /proc/{pid}/cwd/secret.txt"
        for pid in a_pids
    )
    result = await b.bash(
        f"cat /workspace/secret.txt /tmp/secret.txt {probes} 2>&1 | sort | uniq -c | head -5; "
        "for p in /proc/[0-9]*; do cat $p/root/workspace/secret.txt $p/root/tmp/secret.txt $p/cwd/secret.txt; done 2>/dev/null; "
        f"ls -A {a.placement.private_dir} {a.placement.socket_dir}; "
        f"grep -rs -e SECRET-'{token}' /workspace /tmp /dev/shm; echo rc=$?"
    )
    assert f"SECRET-{token}" not in result.output, result.output
    assert result.output.endswith("rc=1\n"), result.output
    py = await b.python(
        "import glob; print([p for p in glob.glob('/proc/*/root/workspace/*') + glob.glob('/proc/*/root/tmp/*') "
        "if p.endswith('secret.txt')])"
    )
    assert py.output == "[]\n", py
    assert (await a.bash("cat secret.txt")).output == f"SECRET-{token}\n"  # A itself still has it
    await _assert_usable(b)


async def test_read_home_directories_and_shadow_fails(make):
    sb = await make()
    result = await sb.bash(
        "ls -A /root /home; cat /etc/shadow /etc/gshadow /etc/sudoers /root/.bashrc; echo HOME=$HOME"
    )
    assert result.output.count("No such file or directory") == 6, result.output
    assert not re.search(r"^root:", result.output, re.M), result.output
    assert result.output.endswith("HOME=/workspace\n"), result.output
    py = await sb.python("import os; os.listdir('/root')")
    assert py.error["ename"] == "FileNotFoundError", py
    await _assert_usable(sb)


# =========================================================================== writing outside


async def test_write_system_dirs_and_sandbox_venv_fails(make):
    sb = await make()
    token = secrets.token_hex(6)
    venv = Path(sb.placement.python).parent.parent
    site = next(venv.glob("lib/python3*/site-packages"))
    must_fail = [
        f"/usr/prorl-sec-{token}",
        "/usr/bin/env",
        f"/usr/local/bin/prorl-sec-{token}",
        f"/bin/prorl-sec-{token}",
        f"/lib/prorl-sec-{token}",
        "/etc/passwd",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        f"{venv}/prorl-sec-{token}",
        f"{venv}/pyvenv.cfg",
        f"{site}/sitecustomize.py",
        f"{site}/prorl-sec-{token}.pth",
    ]
    # Inside these land on the sandbox's own root tmpfs (the host must still be untouched).
    inside_only = [f"/etc/prorl-sec-{token}", "/etc/ld.so.preload", f"{REPO_ROOT}/pyproject.toml"]
    watched = [Path(p) for p in ("/usr/bin/env", "/etc/hosts", "/etc/nsswitch.conf", f"{venv}/pyvenv.cfg")]
    watched += [REPO_ROOT / "pyproject.toml", sb.placement.private_dir / "passwd"]
    before = {p: _sha(p) for p in watched if p.exists()}
    absent = [p for p in must_fail + inside_only if not Path(p).exists()]

    lines = [
        'try_write() { if ( echo pwned >> "$1" ) 2>/tmp/.err; then echo "WROTE $1"; else echo "FAILED $1 :: $(cat /tmp/.err)"; fi; }'
    ]
    lines += [f"try_write {p}" for p in must_fail + inside_only]
    lines += ["rm -f /usr/bin/env; chmod 777 /usr/bin; mv /etc/hosts /etc/hosts.bak; true"]
    result = await sb.bash("\n".join(lines))
    report = {
        line.split(" ", 2)[1]: line for line in result.output.splitlines() if line.startswith(("WROTE", "FAILED"))
    }
    for path in must_fail:
        assert report[path].startswith("FAILED"), report[path]
        assert "Read-only file system" in report[path] or "Permission denied" in report[path], report[path]
    py = await sb.python(f"open('/usr/prorl-sec-{token}', 'w')")
    assert py.error["ename"] == "OSError" and f"[Errno {errno.EROFS}]" in py.error["evalue"], py

    assert {p: _sha(p) for p in before} == before, "a host file changed"
    assert not [p for p in absent if Path(p).exists()], "a file appeared on the host"
    await _assert_usable(sb)


def _tree(root: Path) -> dict[str, tuple[bool, str | None]]:
    """Every entry under a sandbox's host dir (logs excepted: the kernel appends to them)."""
    return {
        str(p.relative_to(root)): (p.is_symlink(), _sha(p) if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
        if not p.name.endswith(".log")
    }


async def test_write_other_sandbox_host_dirs_fails(make):
    a, b = await make(), await make()
    assert (await a.python("a_state = 41")).error is None
    private = a.placement.private_dir
    before = _tree(private)
    result = await b.bash(
        f"mkdir -p {a.placement.socket_dir} {a.placement.control_dir}; "
        f"echo pwned > {a.placement.socket_dir}/injected; for f in {a.placement.control_dir}/*; do echo pwned > $f; done; "
        f"ln -sf /etc/hosts {a.placement.socket_dir}/x.log; echo pwned > {private}/passwd; echo done"
    )
    assert result.output.endswith("done\n"), result  # whatever B did, it did it in its own /tmp
    assert _tree(private) == before
    py = await a.python("print(a_state + 1)")
    assert py.output == "42\n" and not py.kernel_restarted, py
    await _assert_usable(b)


async def test_agent_cannot_plant_links_where_the_server_writes_or_connects(make, host_victim):
    """The server may run as root: no path it writes (connection files, logs) or connects to
    (the kernel's sockets) may be under the sandbox's control. The sandbox sees its socket
    and control directories at their host paths, but can create nothing in them, and the
    kernel's socket directory is taken back once the kernel has bound its sockets. (The IPython
    runtime's: the lean REPL has no paths at all, only the fds it was started with.)"""
    sb = await make(python_runtime="ipython")
    assert (await sb.python("1")).error is None  # a kernel exists: its socket directory is there to attack
    ctl = sb.placement.control_dir
    result = await sb.bash(
        f"{FIND_RUN_DIR}; echo RUN=$R; for d in $R $R/k* {ctl}; do "
        f"ln -s {host_victim} $d/kernel-x.log 2>/dev/null && echo PLANTED $d; "
        f"ln -sf {host_victim} $d/k-1 2>/dev/null && echo SWAPPED $d; done; "
        f"rm -f $R/k*/k-1 2>/dev/null && echo REMOVED; for f in {ctl}/*; do echo x > $f 2>/dev/null && echo WROTE $f; done; echo end"
    )
    assert f"RUN={sb.placement.socket_dir}\n" in result.output  # the agent does find the host-side paths
    for word in ("PLANTED", "SWAPPED", "REMOVED", "WROTE"):
        assert word not in result.output, result.output
    # a kernel restart (the server writes a new connection file and log, binds new sockets)
    await sb.python("import os; os._exit(1)")
    py = await sb.python("import os; os.write(2, b'INJECTED-BY-SANDBOX\\n'); print('ok')")
    assert "ok\n" in py.output, py
    assert host_victim.read_text() == "ORIGINAL\n", (
        f"host file written by the server: {host_victim.read_text()[:200]!r}"
    )
    await _assert_usable(sb)
