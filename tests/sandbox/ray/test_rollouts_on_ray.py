# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Every environment with its sandboxes on hosts of a real multi-node Ray cluster: real ng_run
and ng_collect_rollouts, every server joined to the cluster (`ray_head_node_address`), and a
sandbox node lost in the middle of a collection."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from prorl_gym.environments import all_config_paths, discover
from prorl_gym.jsonl import read_jsonl
from prorl_gym.sandbox.backends.local.processes import processes_mounting
from prorl_gym.sandbox.backends.ray.local_cluster import LocalRayCluster
from prorl_gym.sandbox.leases import read_leases
from prorl_gym.serve import wait_for_host_nodes
from prorl_gym.stack import Stack, collected_records
from prorl_gym.testing import traversable_dir

ENVIRONMENTS = {env.name: env for env in discover()}


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(sandbox_nodes=3) as c:
        yield c


@pytest.fixture(scope="module")
def stack(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray-e2e")
    root = traversable_dir("prorl-ray-")
    overrides = [f"+ray_head_node_address={cluster.address}"]
    for env in ENVIRONMENTS.values():
        overrides += [f"+{env.server_key}.sandbox.root_dir={root}", f"+{env.server_key}.sandbox.backend.kind=ray"]
    policy_data = [str(env.example) for env in ENVIRONMENTS.values()]
    with Stack(
        all_config_paths(list(ENVIRONMENTS.values())),
        overrides=overrides,
        policy_data=policy_data,
        policy_args=["--tool-calls", "2", "--latency-ms", "150"],
        log_dir=tmp / "logs",
    ) as stack:
        stack.tmp, stack.sandbox_root = tmp, root
        yield stack
    assert not read_leases(root), "leases left behind"


def kill_when_busy(cluster: LocalRayCluster, victim, status_url: str, timeout_s: float = 120) -> None:
    """Kill the victim node once rollouts are in flight (sessions, not only warm-pool sandboxes,
    which every host holds from the start) and its host runs sandboxes of this server."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(status_url, timeout=10) as response:
            status = json.load(response)
        on_victim = any(h["node"].endswith(victim.node_id[:8]) and h["live"] for h in status["hosts"])
        if status["live_sandboxes"] >= 8 and on_victim:
            break
        time.sleep(0.05)
    cluster.kill_node(victim)


def hosts_of(records: list[dict]) -> set[str]:
    return {r["host"] for r in records if r.get("host")}


def test_serve_counts_the_hosts_and_refuses_a_cluster_without_them(cluster):
    assert wait_for_host_nodes(cluster.address, "prorl_sandbox_host", 1, 0.0) == 3
    # This cluster has no node with this resource: serve refuses before it starts anything.
    run = subprocess.run(
        [sys.executable, "-m", "prorl_gym.serve", "--envs", "math", "--scripted-policy"]
        + ["--ray-address", cluster.address, "--host-resource", "prorl_no_such_host"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 0 of the 1 Ray node(s) with the resource 'prorl_no_such_host' needed are up")
    assert "ray start --address" in last and "up: head server" not in run.stderr


def test_every_environment_runs_its_sandboxes_on_the_cluster_hosts(stack, cluster):
    seen: set[str] = set()
    for env in ENVIRONMENTS.values():
        output = stack.tmp / f"{env.name}.jsonl"
        stack.collect(env.agent, env.example, output, num_repeats=2)
        records = collected_records(output)
        assert len(records) == 10 and not [r["failure"] for r in records if r["failure"]], env.name
        assert [r["reward"] for r in records] == [1.0] * 10, env.name
        seen |= hosts_of(records)
    node_ids = {n.node_id[:8] for n in cluster.nodes}
    assert len(seen) >= 2 and {host.split("@")[1] for host in seen} <= node_ids, seen


def test_a_node_lost_mid_collection_costs_no_rollout(stack, cluster):
    victim = cluster.nodes[-1]
    output = stack.tmp / "loss.jsonl"
    rows = stack.tmp / "loss-rows.jsonl"
    env = ENVIRONMENTS["math"]
    slow = read_jsonl(env.example)
    for row in slow:  # 2 s per policy turn: the node dies while the rollouts still need their sandboxes
        row["responses_create_params"]["metadata"] = {"scripted_latency_ms": "2000"}
    rows.write_text("".join(json.dumps(r) + "\n" for r in slow))
    status_url = f"{stack.server_urls()[env.name]}/status"
    killer = threading.Thread(target=kill_when_busy, args=(cluster, victim, status_url))
    killer.start()
    try:
        stack.collect(env.agent, rows, output, num_repeats=16)
    finally:
        killer.join()
    records = collected_records(output)
    assert len(records) == 80
    victim_host = f"@{victim.node_id[:8]}"
    affected = [r for r in records if any(f["type"] == "sandbox_lost" for f in r.get("attempt_failures", []))]
    affected += [r for r in records if r["failure"] and r["failure"]["type"] == "sandbox_lost"]
    assert affected, "the node was lost before or after every rollout: nothing was exercised"
    for record in records:
        if record["failure"]:  # typed, never a silent reward
            assert record["failure"]["type"] == "sandbox_lost" and record["reward"] == 0.0, record["failure"]
        else:
            assert record["reward"] == 1.0
    retried = [r for r in affected if not r["failure"]]
    assert all(not r["host"].endswith(victim_host) for r in retried)  # re-run on a survivor
    # Later rollouts land on the survivors only.
    after = stack.tmp / "after.jsonl"
    stack.collect(env.agent, env.example, after, num_repeats=4)
    later = collected_records(after)
    assert [r["reward"] for r in later] == [1.0] * 20
    assert not any(host.endswith(victim_host) for host in hosts_of(later))


def test_a_node_that_comes_back_has_its_leftovers_reaped(stack, cluster):
    """The lost node's sandboxes (their processes, even one orphaned mid-start), leases and
    directories are reaped by the host a server starts when the node is back."""
    cluster.add_node()
    deadline = time.monotonic() + 60
    while leftovers(stack.sandbox_root) and time.monotonic() < deadline:
        time.sleep(1)
    assert not leftovers(stack.sandbox_root)
    kept = {Path(lease.private_dir).name for lease in read_leases(stack.sandbox_root)}  # SWE's shared-INIT templates
    assert not [p.name for p in stack.sandbox_root.iterdir() if not p.name.startswith(".") and p.name not in kept]
    # No sandbox process is left: none has a mount from the root (also one orphaned by its host's death).
    assert not processes_mounting(f"{stack.sandbox_root}/")


def leftovers(root: Path) -> list:
    """Leases of sandboxes, or of templates whose host is gone. A live host's templates (SWE shares
    INIT: a task's template stays for its next samples, share_init_ttl_s) are not leftovers."""
    return [lease for lease in read_leases(root) if not lease.sandbox_id.startswith("tpl-") or lease.orphaned]
