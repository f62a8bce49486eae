# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real multi-node Ray cluster on this machine, for tests and benchmarks (not for production).

Each node is its own raylet (its own processes), on the loopback address 127.0.0.2 (127.0.0.1
and localhost are rewritten to the external address, and ray.init hangs). Token auth is off
here (loopback only; docs/ray.md tells operators to keep it on), RAY_TMPDIR is private, and
node failures are detected in ~1.5 s (health checks every 500 ms, 3 misses). Never `ray stop`:
it would stop every Ray on the machine; `close()` stops only this cluster.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

NODE_IP = "127.0.0.2"
HOST_RESOURCE = "prorl_sandbox_host"
OBJECT_STORE_BYTES = 80 * 1024 * 1024
FAST_FAILURE_DETECTION = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


class LocalRayCluster:
    """A head (no CPUs: nothing of ours runs there) and `sandbox_nodes` nodes offering HOST_RESOURCE."""

    def __init__(self, sandbox_nodes: int = 2, cpus_per_node: int = 1):
        self.sandbox_nodes = sandbox_nodes
        self.cpus_per_node = cpus_per_node
        self.nodes: list[Any] = []
        self.cluster = None
        self.tmpdir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")

    @property
    def address(self) -> str:
        return self.cluster.address

    def start(self) -> LocalRayCluster:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # read by every process this cluster starts
        os.environ["RAY_TMPDIR"] = self.tmpdir
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "include_dashboard": False,
                "node_ip_address": NODE_IP,
                "object_store_memory": OBJECT_STORE_BYTES,
                "_system_config": FAST_FAILURE_DETECTION,
            },
        )
        for _ in range(self.sandbox_nodes):
            self.add_node()
        self.cluster.wait_for_nodes()
        return self

    def add_node(self, **resources: float) -> Any:
        node = self.cluster.add_node(
            num_cpus=self.cpus_per_node,
            resources={HOST_RESOURCE: 1, **resources},
            node_ip_address=NODE_IP,
            object_store_memory=OBJECT_STORE_BYTES,
        )
        self.nodes.append(node)
        return node

    def kill_node(self, node: Any) -> None:
        """The node dies without grace (its raylet and workers SIGKILLed), as a lost machine."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if self.cluster is not None:
            self.cluster.shutdown()
        import shutil

        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
