# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""deploy/slurm/prorl_gym.sbatch on a real 3-node Slurm (tests/support/slurm_cluster.py): the job brings up
a Ray cluster over its nodes, the service on the first, sandbox hosts on the other two; rollouts
collected through its head server run on both hosts; `scancel` stops everything it started."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from prorl_gym.environments import environment
from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox.backends.local.processes import processes_naming
from prorl_gym.sandbox.backends.ray.local_cluster import NODE_IP
from prorl_gym.sandbox.leases import read_leases
from prorl_gym.stack import BIN, collected_records, free_port
from prorl_gym.testing import traversable_dir
from tests.support.slurm_cluster import LocalSlurm, available

AVAILABLE, WHY = available()
pytestmark = [pytest.mark.skipif(not AVAILABLE, reason=WHY), pytest.mark.timeout(600)]
SBATCH = REPO_ROOT / "deploy" / "slurm" / "prorl_gym.sbatch"
MATH = environment("math")


@pytest.fixture
def slurm():
    with LocalSlurm(nodes=3) as cluster:
        yield cluster


def wait_for(predicate, what: str, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout_s}s; job log:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(1)


def test_a_job_serves_rollouts_from_hosts_on_its_nodes_and_scancel_stops_it(slurm, tmp_path):
    root = traversable_dir("prorl-slurm-")
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # short: Ray's socket paths live below it
    head_port, log = free_port(), tmp_path / "job.log"
    env = slurm.env | {
        "PRORL_HOME": str(REPO_ROOT),
        "PRORL_ENVS": "math",
        "PRORL_SCRIPTED_POLICY": "1",
        "PRORL_INNER_BACKEND": "local",
        "PRORL_SANDBOX_ROOT": str(root / "sandboxes"),
        "PRORL_RAY_NODE_IP": NODE_IP,  # every "node" is this machine
        "PRORL_RAY_PORT": str(free_port()),
        "PRORL_RAY_TMPDIR": str(ray_tmp),
        "PRORL_HEAD_PORT": str(head_port),
        "RAY_AUTH_MODE": "disabled",  # loopback only; docs/hpc.md keeps token auth on
    }
    job = slurm.run(["sbatch", "--parsable", "-N", "3", "-o", str(log), str(SBATCH)], env=env).stdout.strip()
    try:
        wait_for(lambda: log.exists() and "[serve] up" in log.read_text(errors="replace"), "service", 300, log)
        assert "2 sandbox-host node(s) up" in log.read_text()
        output = tmp_path / "rollouts.jsonl"
        collect = [
            str(BIN / "ng_collect_rollouts"),
            f"+config_paths=[{','.join(MATH.config_paths())}]",
            f"+head_server.host={NODE_IP}",
            f"+head_server.port={head_port}",
            f"+agent_name={MATH.agent}",
            f"+input_jsonl_fpath={MATH.example}",
            f"+output_jsonl_fpath={output}",
            "+num_repeats=4",
        ]
        subprocess.run(collect, cwd=REPO_ROOT, check=True, timeout=300, capture_output=True)
        records = collected_records(output)
        assert [r["reward"] for r in records] == [1.0] * 20
        assert len({r["host"].split("@")[1] for r in records}) == 2  # both sandbox-host nodes ran rollouts
        assert len(job_states(slurm, job)) == 1  # still serving
        # The orderly stop (what Slurm also sends before the time limit) while rollouts are in flight.
        busy = subprocess.Popen(
            [*collect[:-2], f"+output_jsonl_fpath={tmp_path / 'stopped.jsonl'}", "+num_repeats=40"],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: len(read_leases(root / "sandboxes")) >= 2, "rollouts in flight", 120, log)
        slurm.run(["scancel", "--batch", "--signal=TERM", job])
        wait_for(lambda: not job_states(slurm, job), "the job's end", 120, log)
        busy.kill()  # NeMo Gym's collector retries a service that is gone without end
        busy.wait()
        wait_for(lambda: not slurm.processes(), "the job's processes to end", 60, log)
    finally:
        subprocess.run(["scancel", job], env=slurm.env, capture_output=True)
    text = log.read_text(errors="replace")
    assert "head node1" in text and "sandbox hosts: node2 node3" in text, text[-3000:]
    assert "[prorl-gym] stopping: the service" in text, text[-3000:]
    for record in collected_records(tmp_path / "stopped.jsonl"):  # finished, or typed: never a silent 0
        assert record["reward"] == 1.0 or record["failure"]["type"] == "shutdown", record
    assert not read_leases(root / "sandboxes"), "leases left behind"
    assert not [p for p in (root / "sandboxes").iterdir() if not p.name.startswith(".")]
    assert not processes_naming(str(ray_tmp)), "Ray processes left behind"
    for path in (root, ray_tmp):
        subprocess.run(["rm", "-rf", str(path)], check=False)


def job_states(slurm: LocalSlurm, job: str) -> list[str]:
    out = slurm.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.split()
    return [s for s in out if s not in ("COMPLETED", "CANCELLED", "FAILED")]
