# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment of resource exhaustion: processes, memory, disk, output and CPU.

A fork bomb and a foreground fork loop (the process limit, other sandboxes unaffected), a
memory hog (an address-space limit: MemoryError), filling /workspace, /tmp, /dev/shm, the
sandbox's root tmpfs, the host-backed socket dir and a tmpfs mounted in a nested user
namespace, a file past file_size_bytes, an output flood (bounded in the result and in the
server's memory), an infinite loop (timeout, state kept) and a CPU hog (cpu_time_s).
"""

from __future__ import annotations

import asyncio
import errno
import re

from tests.security.helpers import (
    FIND_RUN_DIR,
    LIMITS,
    MiB,
    _assert_usable,
    _disk_usage,
    _pids,
    _procs,
    _rss_bytes,
    _wait_until,
)

FILL_CHUNK_MIB = 15  # below file_size_bytes, so filling a filesystem is not stopped by "File too large"
FILL_FILES = 6  # 6 x 15 MiB = 90 MiB: more than workspace_bytes, tmp_bytes and /dev/shm (64 MiB)


# =========================================================================== fork bomb


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


# =========================================================================== memory


async def test_memory_hog_gets_memory_error(make):
    sb = await make()
    result = await sb.bash('python3 -c "b = bytearray(2 << 30)"; echo rc=$?')
    assert "MemoryError" in result.output and result.output.endswith("rc=1\n"), result.output
    result = await sb.bash(
        "python3 -c '\nchunks = []\ntry:\n    while True: chunks.append(bytearray(64 << 20))\n"
        'except MemoryError:\n    print("MemoryError after", len(chunks) * 64, "MiB")\''
    )
    match = re.search(r"MemoryError after (\d+) MiB", result.output)
    assert match and int(match.group(1)) < LIMITS.memory_bytes // MiB, result.output
    py = await sb.python("x = bytearray(2 << 30)")
    assert py.error and py.error["ename"] == "MemoryError" and not py.kernel_restarted, py
    py = await sb.python("print(6 * 7)")
    assert py.output == "42\n" and not py.kernel_restarted, py
    await _assert_usable(sb)


# =========================================================================== disk


def _fill(directory: str) -> str:
    return (
        f"for i in $(seq {FILL_FILES}); do dd if=/dev/zero of={directory}/fill$i bs=1M count={FILL_CHUNK_MIB} 2>&1 "
        f"| grep -v records; done; echo used={directory}:$(cat {directory}/fill* | wc -c)"
    )


async def test_disk_fill_workspace_tmp_and_shm_gives_no_space_left(make):
    sb = await make()
    for directory, size in (
        ("/workspace", LIMITS.workspace_bytes),
        ("/tmp", LIMITS.tmp_bytes),
        ("/dev/shm", 64 * MiB),
    ):
        result = await sb.bash(_fill(directory))
        assert "No space left on device" in result.output, result.output
        used = int(re.search(rf"used={directory}:(\d+)", result.output).group(1))
        assert used <= size, result.output
        assert _disk_usage(sb.placement.private_dir) < MiB, "sandbox data landed on the host disk"
        assert (
            await sb.bash(f"rm -f {directory}/fill*; echo ok > {directory}/ok && cat {directory}/ok")
        ).output == "ok\n"
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
    result = await sb.bash(
        "python3 -c \"open('/tmp/big2', 'wb').write(b'0' * (20 << 20))\" 2>&1 | tail -1; stat -c size=%s /tmp/big2"
    )
    assert result.output == f"OSError: [Errno {errno.EFBIG}] File too large\nsize={LIMITS.file_size_bytes}\n", (
        result.output
    )
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
    assert written <= LIMITS.workspace_bytes, (
        f"wrote {written // MiB} MiB into a private tmpfs: {result.output[-300:]!r}"
    )
    await _assert_usable(sb)


# =========================================================================== output flood


async def test_output_flood_is_bounded(make):
    sb = await make()
    limit = sb.spec.output_limit_bytes
    rss_before = _rss_bytes()
    for command in ("yes", "cat /dev/urandom"):
        result = await sb.bash(command, timeout=2)
        # Interrupted: by Ctrl-C (130), or by the SIGKILL it escalates to when the flood's tail is not read
        # within the grace (137: a loaded machine, twice in this suite's full runs)
        assert result.timed_out and result.truncated and result.exit_code in (130, 137), result.model_dump(
            exclude={"output"}
        )
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


# =========================================================================== CPU


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
    soft and the hard limit to N (prorl_gym/sandbox/backends/local/bwrap.py, prlimit_prefix), and at
    the hard limit the kernel sends SIGKILL: the agent sees "Killed", 137, like any kill -9."""
    sb = await make(limits=LIMITS.model_copy(update={"cpu_time_s": 1}))
    result = await sb.bash("python3 -c 'while True: pass'; echo rc=$?", timeout=20)
    assert not result.timed_out and not result.shell_restarted, result
    await _assert_usable(sb)
    assert result.output.endswith("rc=152\n"), f"expected SIGXCPU (152), got: {result.output!r}"
