"""Containment: escape and exhaustion attempts against real (bubblewrap) sandboxes.

Every test plays the agent: it tries to read or write outside its sandbox, reach the host,
signal host processes or exhaust a resource, then asserts (1) containment, checked from
the host side where possible, (2) a clear result, and (3) that the sandbox is still usable
afterwards (or that the result says it was restarted). A module-scoped fixture checks
at the end that no process of any sandbox created here is left and that the sandbox
root holds nothing.

Processes are attributed to a sandbox by its pid namespace (every process of a sandbox
lives in the pid namespace of its pid 1), never by the shared sandbox uid: other
sandboxes of unrelated test runs may be alive on the same host at the same time. A pid
namespace's inode number is reused as soon as it is freed, so it only identifies the
sandbox while its pid 1 (same pid, same start time) is alive; once pid 1 is gone the
kernel has killed every process of that namespace.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import Sandbox, SandboxFileNotFound, SandboxSpec, SandboxStartError, create_sandbox
from prorl_gym.sandbox.spec import REPO_ROOT, Limits

MiB = 1 << 20
# Small limits keep the exhaustion tests fast and cheap. memory_bytes is an address-space
# limit per process: the IPython kernel alone reserves ~520-720 MiB of address space at
# start-up (11 threads, glibc arenas), so 512 MiB makes kernel start-up fail intermittently.
LIMITS = Limits(
    processes=64,
    memory_bytes=1024 * MiB,
    file_size_bytes=16 * MiB,
    open_files=256,
    workspace_bytes=64 * MiB,
    tmp_bytes=64 * MiB,
    cpu_time_s=20,
)
FILL_CHUNK_MIB = 15  # below file_size_bytes, so filling a filesystem is not stopped by "File too large"
FILL_FILES = 6  # 6 x 15 MiB = 90 MiB: more than workspace_bytes, tmp_bytes and /dev/shm (64 MiB)
SPEC = SandboxSpec()  # for defaults (host_uid)
SANDBOX_UID = SPEC.host_uid if os.geteuid() == 0 else os.getuid()
# The run dir (kernel sockets) is the only host directory bound writable: an agent finds it in its mount table.
FIND_RUN_DIR = "R=$(awk '$2 ~ /^\\/tmp\\/.*\\/run$/ {print $2}' /proc/self/mounts)"

# Everything this module created, for the final leak check.
_CREATED: list[dict] = []


# --------------------------------------------------------------------------- host-side helpers


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _mounts_mention(pid: int, text: str) -> bool:
    """Every process of a sandbox has its socket dir (under the sandbox root) in its mount table."""
    try:
        return text in Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return False


def _procs_in_ns(ns: str) -> list[int]:
    return [pid for pid in _pids() if _pid_ns(pid) == ns]


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    state = _status(pid).get("State", "")
    return bool(state) and not state.startswith(("Z", "X"))


def _runs_code(pid: int) -> bool:
    """Alive and not already exiting (a pid 1 waiting in zap_pid_ns_processes for its
    namespace's zombies to be reaped runs no code any more)."""
    try:
        exiting = Path(f"/proc/{pid}/wchan").read_text() == "zap_pid_ns_processes"
    except OSError:
        exiting = False
    return _alive(pid) and not exiting


def _disk_usage(path: Path) -> int:
    """Bytes allocated on the host under path (what a sandbox could have put on the host disk)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _sandbox_procs(entry: dict) -> list[int]:
    """Host pids of the processes inside a sandbox (its pid namespace), [] once its pid 1 is gone."""
    init = entry["init_pid"]
    if not _alive(init) or _start_time(init) != entry["init_start"]:
        return []
    return _procs_in_ns(entry["ns"])


def _leftovers(root: str) -> dict[int, str]:
    """Processes of any sandbox of this module that can still run code: inside one (its pid
    namespace, or a mount table with the module's root in it), naming the module's root dir
    (bwrap), or our children joining one (nsenter).
    (A pid 1 already exiting, waiting for its zombies to be reaped, is the subject of
    test_close_leaves_nothing_for_the_hosts_init_to_reap.)"""
    found = {pid: _cmdline(pid)[:200] for entry in _CREATED for pid in _sandbox_procs(entry) if _runs_code(pid)}
    joins = tuple(f"nsenter -t {entry['init_pid']} " for entry in _CREATED)
    for pid in _pids():
        if pid == os.getpid() or not _runs_code(pid):
            continue
        cmd = _cmdline(pid)
        ours = _status(pid).get("PPid") == str(os.getpid())
        if root in cmd or _mounts_mention(pid, root) or (ours and any(join in cmd for join in joins)):
            found[pid] = cmd[:200]
    return found


def _host_canary() -> subprocess.Popen:
    """A host process running as the sandbox uid: only the pid namespace separates it from the agent."""
    argv = ["sleep", "300"]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--", *argv]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def module_root():
    """One sandbox root for the module; at the end no process and no directory of ours is left."""
    root = tempfile.mkdtemp(prefix="prorl-sec-", dir="/tmp")
    os.chmod(root, 0o711)
    yield root
    deadline = time.monotonic() + 10
    while (left := _leftovers(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    # .leases/ and .etc-*/ are the root's shared directories: they may stay, but no lease of ours may.
    entries = sorted(name for name in os.listdir(root) if name != ".leases" and not name.startswith(".etc-"))
    leases = Path(root) / ".leases"
    entries += [f".leases/{path.name}" for path in sorted(leases.iterdir())] if leases.is_dir() else []
    for pid in left:  # ours: clean up so a failure here does not leak into other tests
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"processes of this module's sandboxes survived: {left}"
    assert not entries, f"left under the sandbox root {root}: {entries}"


@pytest.fixture
async def make(module_root):
    """make(**spec_overrides) -> a started sandbox under the module root, closed after the test."""
    made: list[Sandbox] = []

    async def _make(**overrides) -> Sandbox:
        fields = dict(
            root_dir=module_root, limits=LIMITS, command_timeout_s=10, python_timeout_s=20, start_timeout_s=20,
        )  # fmt: skip
        fields.update(overrides)
        sb = await create_sandbox(SandboxSpec(**fields))
        made.append(sb)
        init_pid = sb.placement.init_pid
        ns = _pid_ns(init_pid)
        assert ns is not None, "sandbox pid 1 not visible from the host"
        _CREATED.append({"id": sb.id, "init_pid": init_pid, "init_start": _start_time(init_pid), "ns": ns})
        return sb

    yield _make
    await asyncio.gather(*(sb.close() for sb in made), return_exceptions=True)


@pytest.fixture
def host_victim():
    """A root-only host file (0600 in a 0700 dir) that must never change."""
    directory = Path(tempfile.mkdtemp(prefix="prorl-sec-victim-", dir="/tmp"))
    victim = directory / "victim.conf"
    victim.write_text("ORIGINAL\n")
    os.chmod(victim, 0o600)
    yield victim
    shutil.rmtree(directory, ignore_errors=True)


def _entry(sb: Sandbox) -> dict:
    return next(entry for entry in _CREATED if entry["id"] == sb.id)


def _ns(sb: Sandbox) -> str:
    return _entry(sb)["ns"]


def _procs(sb: Sandbox) -> list[int]:
    return _sandbox_procs(_entry(sb))


async def _assert_usable(sb: Sandbox) -> None:
    result = await sb.bash("echo usable-$((6 * 7))")
    assert result.output == "usable-42\n", result
    assert result.exit_code == 0 and not result.timed_out and not result.shell_restarted


# =========================================================================== 1. reading outside


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
    py = await sb.python(f"import os; print(os.path.exists({repo + '/pyproject.toml'!r})); open({repo + '/pyproject.toml'!r})")
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
    await a.bash(f"echo SECRET-{token} > /workspace/secret.txt; cp /workspace/secret.txt /tmp/secret.txt; cd /workspace")
    a_pids = _procs(a) + [a.placement.holder_pid, a.placement.init_pid]
    assert len(a_pids) >= 4
    probes = " ".join(
        f"/proc/{pid}/root/workspace/secret.txt /proc/{pid}/root/tmp/secret.txt /proc/{pid}/cwd/secret.txt" for pid in a_pids
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
    result = await sb.bash("ls -A /root /home; cat /etc/shadow /etc/gshadow /etc/sudoers /root/.bashrc; echo HOME=$HOME")
    assert result.output.count("No such file or directory") == 6, result.output
    assert not re.search(r"^root:", result.output, re.M), result.output
    assert result.output.endswith("HOME=/workspace\n"), result.output
    py = await sb.python("import os; os.listdir('/root')")
    assert py.error["ename"] == "FileNotFoundError", py
    await _assert_usable(sb)


# =========================================================================== 2. writing outside


async def test_write_system_dirs_and_sandbox_venv_fails(make):
    sb = await make()
    token = secrets.token_hex(6)
    venv = Path(sb.placement.python).parent.parent
    site = next(venv.glob("lib/python3*/site-packages"))
    must_fail = [
        f"/usr/prorl-sec-{token}", "/usr/bin/env", f"/usr/local/bin/prorl-sec-{token}", f"/bin/prorl-sec-{token}",
        f"/lib/prorl-sec-{token}", "/etc/passwd", "/etc/hosts", "/etc/nsswitch.conf",
        f"{venv}/prorl-sec-{token}", f"{venv}/pyvenv.cfg", f"{site}/sitecustomize.py", f"{site}/prorl-sec-{token}.pth",
    ]  # fmt: skip
    # Inside these land on the sandbox's own root tmpfs (the host must still be untouched).
    inside_only = [f"/etc/prorl-sec-{token}", "/etc/ld.so.preload", f"{REPO_ROOT}/pyproject.toml"]
    watched = [Path(p) for p in ("/usr/bin/env", "/etc/hosts", "/etc/nsswitch.conf", f"{venv}/pyvenv.cfg")]
    watched += [REPO_ROOT / "pyproject.toml", sb.placement.private_dir / "passwd"]
    before = {p: _sha(p) for p in watched if p.exists()}
    absent = [p for p in must_fail + inside_only if not Path(p).exists()]

    lines = ['try_write() { if ( echo pwned >> "$1" ) 2>/tmp/.err; then echo "WROTE $1"; else echo "FAILED $1 :: $(cat /tmp/.err)"; fi; }']
    lines += [f"try_write {p}" for p in must_fail + inside_only]
    lines += ["rm -f /usr/bin/env; chmod 777 /usr/bin; mv /etc/hosts /etc/hosts.bak; true"]
    result = await sb.bash("\n".join(lines))
    report = {line.split(" ", 2)[1]: line for line in result.output.splitlines() if line.startswith(("WROTE", "FAILED"))}
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
    kernel's socket directory is taken back once the kernel has bound its sockets."""
    sb = await make()
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
    assert host_victim.read_text() == "ORIGINAL\n", f"host file written by the server: {host_victim.read_text()[:200]!r}"
    await _assert_usable(sb)


# =========================================================================== 3. network


async def test_connect_to_host_loopback_listener_fails(make):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # abstract unix sockets live in the net namespace
    abstract_name = f"\0prorl-sec-{secrets.token_hex(6)}"
    abstract.bind(abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    try:
        sb = await make()
        result = await sb.bash(
            f"echo hi > /dev/tcp/127.0.0.1/{port}; echo rc=$?; echo hi > /dev/tcp/localhost/{port}; echo rc=$?; "
            f"timeout 5 python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)' 2>&1 | tail -1"
        )
        assert result.output.count("Connection refused") >= 3 and result.output.count("rc=1\n") == 2, result.output
        py = await sb.python(
            f"import socket\n"
            f"for target in [(socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {abstract_name!r})]:\n"
            f"    s = socket.socket(target[0]); s.settimeout(2)\n"
            f"    try:\n"
            f"        s.connect(target[1]); print('CONNECTED', target)\n"
            f"    except OSError as e:\n"
            f"        print(type(e).__name__)\n"
        )
        assert py.output == "ConnectionRefusedError\nConnectionRefusedError\n", py
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()  # nobody ever connected
        await _assert_usable(sb)
    finally:
        listener.close()
        abstract.close()


async def test_no_network_interfaces_routes_or_dns(make):
    sb = await make()
    result = await sb.bash(
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo routes=$(tail -n +2 /proc/net/route | wc -l); "
        "ls /etc/resolv.conf; getent hosts example.com; echo dns_rc=$?; "
        "echo > /dev/tcp/1.1.1.1/53; echo > /dev/tcp/10.0.2.2/80; true"
    )
    lines = result.output.splitlines()
    assert lines[0] == "lo" and lines[1] == "routes=0", result.output
    assert "dns_rc=2" in lines and "No such file or directory" in result.output, result.output
    assert result.output.count("Network is unreachable") >= 2, result.output
    py = await sb.python("import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\nexcept OSError as e:\n    print(type(e).__name__)")
    assert py.output == "gaierror\n", py
    await _assert_usable(sb)


# =========================================================================== 4. signals


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


# =========================================================================== 5. fork bomb


async def test_fork_bomb_is_contained(make):
    a, b = await make(), await make()
    host_before = len(_pids())
    result = await a.bash(":(){ :|:& };:", timeout=5)
    assert result.exit_code == 0 and not result.timed_out  # the bomb goes to the background at once
    peak_ns = peak_host = 0
    for _ in range(15):
        peak_ns = max(peak_ns, len(_procs(a)))
        peak_host = max(peak_host, len(_pids()))
        await asyncio.sleep(0.1)
    assert peak_ns <= LIMITS.processes, f"{peak_ns} processes in a sandbox limited to {LIMITS.processes}"
    assert peak_host - host_before <= LIMITS.processes + 200, f"host process count {host_before} -> {peak_host}"
    other = await b.bash("echo b-ok; /bin/echo b-fork-ok", timeout=10)
    assert other.output == "b-ok\nb-fork-ok\n" and not other.timed_out, other
    # The agent can clean up with builtins (no fork needed), and the sandbox works again.
    result = await a.bash("kill -9 -1; /bin/echo cleaned", timeout=10)
    assert "cleaned\n" in result.output and not result.timed_out, result
    assert await _wait_until(lambda: len(_procs(a)) <= 4), _procs(a)
    await _assert_usable(a)


async def test_foreground_fork_loop_is_interrupted_and_cleaned_up(make):
    sb = await make()
    code = (
        "import os, time\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as e:\n"
        "        print('fork failed errno', e.errno, 'after', n, flush=True)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(600)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "time.sleep(600)\n"
    )
    await sb.write_file("forkloop.py", code)
    result = await sb.bash("python3 forkloop.py", timeout=3)
    assert result.timed_out and not result.shell_restarted, result
    match = re.search(r"fork failed errno (\d+) after (\d+)", result.output)
    assert match and int(match.group(1)) == errno.EAGAIN, result.output
    assert int(match.group(2)) < LIMITS.processes, result.output
    assert await _wait_until(lambda: len(_procs(sb)) <= 5), _procs(sb)
    await _assert_usable(sb)


# =========================================================================== 6. memory


async def test_memory_hog_gets_memory_error(make):
    sb = await make()
    result = await sb.bash('python3 -c "b = bytearray(2 << 30)"; echo rc=$?')
    assert "MemoryError" in result.output and result.output.endswith("rc=1\n"), result.output
    result = await sb.bash(
        "python3 -c '\nchunks = []\ntry:\n    while True: chunks.append(bytearray(64 << 20))\n"
        "except MemoryError:\n    print(\"MemoryError after\", len(chunks) * 64, \"MiB\")'"
    )
    match = re.search(r"MemoryError after (\d+) MiB", result.output)
    assert match and int(match.group(1)) < LIMITS.memory_bytes // MiB, result.output
    py = await sb.python("x = bytearray(2 << 30)")
    assert py.error and py.error["ename"] == "MemoryError" and not py.kernel_restarted, py
    py = await sb.python("print(6 * 7)")
    assert py.output == "42\n" and not py.kernel_restarted, py
    await _assert_usable(sb)


# =========================================================================== 7. disk


def _fill(directory: str) -> str:
    return (
        f"for i in $(seq {FILL_FILES}); do dd if=/dev/zero of={directory}/fill$i bs=1M count={FILL_CHUNK_MIB} 2>&1 "
        f"| grep -v records; done; echo used={directory}:$(cat {directory}/fill* | wc -c)"
    )


async def test_disk_fill_workspace_tmp_and_shm_gives_no_space_left(make):
    sb = await make()
    for directory, size in (("/workspace", LIMITS.workspace_bytes), ("/tmp", LIMITS.tmp_bytes), ("/dev/shm", 64 * MiB)):
        result = await sb.bash(_fill(directory))
        assert "No space left on device" in result.output, result.output
        used = int(re.search(rf"used={directory}:(\d+)", result.output).group(1))
        assert used <= size, result.output
        assert _disk_usage(sb.placement.private_dir) < MiB, "sandbox data landed on the host disk"
        assert (await sb.bash(f"rm -f {directory}/fill*; echo ok > {directory}/ok && cat {directory}/ok")).output == "ok\n"
    await _assert_usable(sb)


async def test_file_larger_than_limit_is_stopped_at_the_limit(make):
    """A shell tool writing past file_size_bytes dies of SIGXFSZ (bash: "File size limit
    exceeded", 128 + 25 = 153); Python ignores SIGXFSZ and gets EFBIG ("File too large")."""
    sb = await make()
    result = await sb.bash(
        "dd if=/dev/zero of=/workspace/big bs=1M count=20 2>/dev/null; echo rc=$?; stat -c size=%s /workspace/big; "
        "truncate -s 20M /tmp/sparse; echo rc=$?"
    )
    assert result.output.count("File size limit exceeded") == 2, result.output
    assert result.output.count("rc=153\n") == 2 and f"size={LIMITS.file_size_bytes}\n" in result.output, result.output
    py = await sb.python("open('/tmp/big', 'wb').write(b'\\0' * (20 << 20))")
    assert py.error and f"[Errno {errno.EFBIG}] File too large" in py.error["evalue"] and not py.kernel_restarted, py
    result = await sb.bash("python3 -c \"open('/tmp/big2', 'wb').write(b'0' * (20 << 20))\" 2>&1 | tail -1; stat -c size=%s /tmp/big2")
    assert result.output == f"OSError: [Errno {errno.EFBIG}] File too large\nsize={LIMITS.file_size_bytes}\n", result.output
    assert (await sb.python("print('kernel ok')")).output == "kernel ok\n"
    await _assert_usable(sb)


async def test_disk_fill_outside_workspace_and_tmp_is_bounded(make):
    """/ of a sandbox is bwrap's tmpfs, owned by the agent and mounted without a size
    (default: half of the host's RAM): /etc, /junk, ... are unbounded RAM-backed storage."""
    sb = await make()
    result = await sb.bash("mkdir -p /junk; " + _fill("/etc") + "; " + _fill("/junk"))
    written = sum(int(n) for n in re.findall(r"used=[^:]*:(\d+)", result.output))
    await sb.bash("rm -rf /etc/fill* /junk")
    assert written <= LIMITS.workspace_bytes, (
        f"wrote {written // MiB} MiB into /etc and /junk (limits: workspace {LIMITS.workspace_bytes // MiB} MiB, "
        f"tmp {LIMITS.tmp_bytes // MiB} MiB): {result.output[-300:]!r}"
    )
    await _assert_usable(sb)


async def test_disk_fill_through_socket_dir_is_bounded(make):
    """The socket dir is a host directory bound writable: whatever the agent writes there is
    on the host disk, outside every tmpfs size limit."""
    sb = await make()
    result = await sb.bash(f"{FIND_RUN_DIR}; " + _fill("$R"))
    on_host = _disk_usage(sb.placement.private_dir)
    await sb.bash(f"{FIND_RUN_DIR}; rm -f $R/fill*")
    assert on_host <= LIMITS.workspace_bytes, (
        f"the sandbox put {on_host // MiB} MiB on the host disk under {sb.placement.socket_dir}: {result.output[-200:]!r}"
    )
    await _assert_usable(sb)


async def test_disk_fill_through_nested_namespace_tmpfs_is_bounded(make):
    """unshare -Urm inside the sandbox gives a user namespace where mount(tmpfs) works: a
    tmpfs of any size, outside workspace_bytes/tmp_bytes."""
    sb = await make()
    result = await sb.bash(
        "unshare -Urm sh -c 'mount -t tmpfs none /workspace && " + _fill("/workspace").replace("'", "'\\''") + "'"
    )
    match = re.search(r"used=/workspace:(\d+)", result.output)
    written = int(match.group(1)) if match else 0
    assert written <= LIMITS.workspace_bytes, f"wrote {written // MiB} MiB into a private tmpfs: {result.output[-300:]!r}"
    await _assert_usable(sb)


# =========================================================================== 8. output flood


async def test_output_flood_is_bounded(make):
    sb = await make()
    limit = sb.spec.output_limit_bytes
    rss_before = _rss_bytes()
    for command in ("yes", "cat /dev/urandom"):
        result = await sb.bash(command, timeout=2)
        assert result.timed_out and result.truncated and result.exit_code == 130, result.model_dump(exclude={"output"})
        assert len(result.output.encode()) <= limit * 3 + 200  # U+FFFD may triple invalid bytes of urandom
        assert result.output_bytes > 10 * limit
        assert "output truncated" in result.output
    result = await sb.bash("head -c 50000000 /dev/zero | tr '\\0' a; echo", timeout=30)
    assert not result.timed_out and result.truncated and result.exit_code == 0, result.model_dump(exclude={"output"})
    assert result.output_bytes == 50_000_001 and len(result.output) <= limit + 200
    py = await sb.python("print('x' * 10_000_000)")
    assert py.truncated and len(py.output) <= limit + 200, py.model_dump(exclude={"output"})
    py = await sb.python("while True: print('y' * 1000)", timeout=2)
    assert py.timed_out and py.truncated and len(py.output) <= limit + 200, py.model_dump(exclude={"output"})
    assert _rss_bytes() - rss_before < 100 * MiB
    await _assert_usable(sb)
    assert (await sb.python("print('kernel ok')")).output == "kernel ok\n"


# =========================================================================== 9. CPU


async def test_infinite_loop_times_out_and_state_survives(make):
    sb = await make(limits=LIMITS.model_copy(update={"cpu_time_s": 120}))
    await sb.bash("export KEEP=kept; cd /tmp")
    result = await sb.bash("while :; do :; done", timeout=1.5)
    assert result.timed_out and result.exit_code == 130 and not result.shell_restarted, result
    assert (await sb.bash("echo $KEEP $PWD")).output == "kept /tmp\n"
    assert (await sb.python("y = 5")).error is None
    py = await sb.python("while True: pass", timeout=1.5)
    assert py.timed_out and py.error and py.error["ename"] == "KeyboardInterrupt" and not py.kernel_restarted, py
    assert (await sb.python("print(y)")).output == "5\n"
    await _assert_usable(sb)


async def test_cpu_time_limit_kills_cpu_hog_with_sigxcpu(make):
    """Limits documents "CPU time -> SIGXCPU" (bash: 128 + 24 = 152). prlimit --cpu=N sets the
    soft and the hard limit to N (prorl_gym/sandbox/backends/bwrap.py, prlimit_prefix), and at
    the hard limit the kernel sends SIGKILL: the agent sees "Killed", 137, like any kill -9."""
    sb = await make(limits=LIMITS.model_copy(update={"cpu_time_s": 1}))
    result = await sb.bash("python3 -c 'while True: pass'; echo rc=$?", timeout=20)
    assert not result.timed_out and not result.shell_restarted, result
    await _assert_usable(sb)
    assert result.output.endswith("rc=152\n"), f"expected SIGXCPU (152), got: {result.output!r}"


# =========================================================================== 10. leftovers at close


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
    BwrapPlacement.start (prorl_gym/sandbox/backends/bwrap.py) reads bwrap's child pid, then
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
        pid: _cmdline(pid)[:60] for pid in _pids() if _runs_code(pid) and (_mounts_mention(pid, root) or root in _cmdline(pid))
    }
    for pid in left:  # ours: clean up before failing
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)
    assert failed, "no start timed out: the sweep did not exercise the failure path"
    assert not left, f"{failed} failed starts left these sandbox processes running: {left}"


SUBREAPER_SERVER = r"""
import asyncio, ctypes, json, os, signal, sys, time
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Limits

# Like a server that is PID 1 of its container (or runs under a subreaper) and does not
# reap processes it did not start: orphans are re-parented to it and stay zombies.
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER

async def main(root):
    sb = await create_sandbox(SandboxSpec(root_dir=root, limits=Limits.model_validate_json(sys.argv[2])))
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
        sys.executable, "-c", SUBREAPER_SERVER, module_root, LIMITS.model_dump_json(),
        cwd=str(REPO_ROOT), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(run.communicate(), 60)
    assert run.returncode == 0, err.decode()[-2000:]
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert not report["init_alive"] and not report["left"], f"2 s after close(), left to the server to reap: {report}"


# =========================================================================== 11. environment


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
        line.split("=", 1) for line in (await sb.bash("tr '\\0' '\\n' < /proc/1/environ")).output.splitlines() if "=" in line
    )
    kernel_env = json.loads((await sb.python("import os, json; print(json.dumps(dict(os.environ)))")).output)
    file_shell_env = dict(
        item.split("=", 1) for item in (await sb.read_file("/proc/self/environ")).split("\0") if "=" in item
    )
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "TERM", "PAGER", "GIT_PAGER", "PYTHONUNBUFFERED", "PWD", "OLDPWD", "SHLVL", "_"}
    server_bin = str(Path(sys.executable).parent)
    for where, env in (("bash", bash_env), ("pid 1", pid1_env), ("kernel", kernel_env), ("file shell", file_shell_env)):
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


# =========================================================================== 12. privileges


async def test_sandbox_processes_are_unprivileged_on_the_host(make):
    sb = await make()
    await sb.python("1")
    await sb.write_file("probe.txt", "x")  # file shell
    inside = await sb.bash("id -u; grep NoNewPrivs /proc/self/status")
    assert inside.output.split()[0] != "0" and inside.output.endswith("NoNewPrivs:\t1\n"), inside.output
    pids = _procs(sb)
    cmds = {pid: _cmdline(pid) for pid in pids}
    assert sum("ipykernel" in cmd for cmd in cmds.values()) == 1 and sum("bash --noprofile" in cmd for cmd in cmds.values()) == 2, cmds
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
    assert "You may not view or modify password information for root" in result.output, result.output  # passwd ran unprivileged
    assert not re.search(r"^su_rc=0$", result.output, re.M) and not re.search(r"^mount_rc=0$", result.output, re.M)
    assert re.search(r"^(PermissionError|OSError): \[Errno (1|22)\]", result.output, re.M), result.output
    assert lines[-2] == str(SANDBOX_UID) and "0" not in lines[-1].split(), result.output
    py = await sb.python("import os; os.setuid(0)")
    assert py.error and py.error["ename"] in ("PermissionError", "OSError"), py
    await _assert_usable(sb)
