# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandboxes on many nodes: SandboxHost actors on Ray nodes (host.py), their placement, health and
loss (hosts.py), the RemoteSandbox an environment drives (sandbox.py), and a real multi-node Ray
cluster on one machine for tests and benchmarks (local_cluster.py). Selected with the `ray`
backend (prorl_gym/sandbox/backends/ray.py); docs/ray.md."""
