# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The local Slurm cluster (tests/support/slurm_cluster.py) is real: it schedules, runs multi-node steps and batch
jobs, survives a node crash without leaving the crashed node's job processes behind, and leaves nothing
running after close()."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.slurm_cluster import LocalSlurm, _proc_environ, _proc_table, available

AVAILABLE, WHY = available()
pytestmark = [pytest.mark.skipif(not AVAILABLE, reason=WHY), pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def slurm():
    with LocalSlurm(nodes=3) as cluster:
        yield cluster


def _job_processes(cluster: LocalSlurm, job_id: str) -> list[int]:
    """Every process of a job, found independently of LocalSlurm.processes(): all carry our SLURM_CONF in their
    environment (stepds inherit the slurmd's), tasks also SLURM_JOB_ID; stepds are `slurmstepd: [<job>.<step>]`."""
    conf, stepd = str(cluster.conf), f"slurmstepd: [{job_id}.".encode()

    def of_job(pid: int) -> bool:
        env = _proc_environ(pid)
        return env.get("SLURM_CONF") == conf and (env.get("SLURM_JOB_ID") == job_id or _cmdline(pid).startswith(stepd))

    return [pid for pid in _proc_table() if of_job(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _sleeps(pids: list[int]) -> list[str]:
    """The arguments of the `sleep N` processes among pids, sorted."""
    argvs = [_cmdline(pid).decode().split("\0")[:-1] for pid in pids]
    return sorted(argv[1] for argv in argvs if len(argv) == 2 and Path(argv[0]).name == "sleep")


def _ours(directory: str, conf: str) -> list[int]:
    """Processes of a cluster: supervisors, daemons and stepds (marked), job tasks (SLURM_JOB_ID + SLURM_CONF)."""
    found = []
    for pid in _proc_table():
        env = _proc_environ(pid)
        if env.get("LOCAL_SLURM_DIR") == directory or ("SLURM_JOB_ID" in env and env.get("SLURM_CONF") == conf):
            found.append(pid)
    return found


def _existing(pids: list[int]) -> list[str]:
    """The pids still in the process table, zombies included (`ps` would list them)."""
    out = []
    for pid in pids:
        try:
            out.append(f"{pid}: {Path(f'/proc/{pid}/stat').read_text().strip()}")
        except OSError:
            pass
    return out


def _wait(condition, timeout: float = 15.0, what="condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        time.sleep(0.05)


def test_three_nodes_idle(slurm):
    assert slurm.node_states() == {"node1": "idle", "node2": "idle", "node3": "idle"}
    assert slurm.conf.is_file() and slurm.env["SLURM_CONF"] == str(slurm.conf)


def test_srun_on_three_nodes(slurm):
    r = slurm.run(["srun", "-N3", "hostname"])
    assert len(r.stdout.splitlines()) == 3
    r = slurm.run(["srun", "-N3", "printenv", "SLURMD_NODENAME"])
    assert sorted(r.stdout.split()) == ["node1", "node2", "node3"]


def test_sbatch_wait_runs_a_three_node_step(slurm, tmp_path):
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsrun -N3 printenv SLURMD_NODENAME\n")
    slurm.run(["sbatch", "--wait", "-N3", "-o", str(out), str(script)])
    assert sorted(out.read_text().split()) == ["node1", "node2", "node3"]


def test_kill_node_ends_its_jobs_processes(slurm, tmp_path):
    # On node2: the batch script, a step, and a daemonized child that left the job's process tree.
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n( setsid nohup sleep 301 >/dev/null 2>&1 & )\nsrun sleep 302\n")
    r = slurm.run(["sbatch", "--parsable", "--no-requeue", "-w", "node2", "-o", "/dev/null", str(script)])
    job = r.stdout.strip().split(";")[0]
    try:
        _wait(lambda: _sleeps(_job_processes(slurm, job)) == ["301", "302"], what=f"job {job}'s sleeps")
        before = _job_processes(slurm, job)
        assert set(before) <= set(slurm.processes("node2")) and not slurm.processes("node1")

        slurm.kill_node("node2")
        assert not _job_processes(slurm, job)
        assert not _existing(before), "killed processes left (zombies?)"
        assert not slurm.processes("node2")
        assert slurm.node_states()["node1"] == "idle"  # the other nodes are unaffected

        slurm.start_node("node2")
        assert slurm.run(["srun", "-w", "node2", "printenv", "SLURMD_NODENAME"]).stdout.split() == ["node2"]
    finally:
        slurm.run(["scancel", job], check=False)
    # The cluster is whole again for whoever uses it next.
    slurm.wait_nodes(slurm.nodes, ("idle",))


def test_close_leaves_nothing_running(tmp_path):
    cluster = LocalSlurm(nodes=2, workdir=tmp_path)
    cluster.start()
    try:
        directory, conf, munge = str(cluster.dir), str(cluster.conf), cluster.munge_socket.parent
        assert directory.startswith(str(tmp_path))
        # A batch job, so that no client (srun) of ours is left waiting for a step that died with the cluster.
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\n( setsid sleep 303 & )\nsrun -N2 sleep 304\n")
        cluster.run(["sbatch", "-N2", "-o", "/dev/null", str(script)])
        _wait(
            lambda: _sleeps(cluster.processes()) == ["303", "304", "304"],
            60,
            what=lambda: (
                f"the job's sleeps: {_sleeps(cluster.processes())}, queue: "
                + cluster.run(["squeue", "-h", "-o", "%i %T %R"], check=False).stdout
            ),
        )
        pids = _ours(directory, conf)
        assert set(cluster.processes()) <= set(pids)
        cluster.close()
        assert not _ours(directory, conf)
        assert not _existing(pids), "processes of the closed cluster left (zombies?)"
        assert not [pid for pid in _proc_table() if str(munge).encode() in _cmdline(pid)]  # munged
        assert not Path(directory).exists() and not munge.exists()
        cluster.close()  # idempotent
    finally:
        cluster.close()
