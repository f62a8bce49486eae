# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `ray` backend: sandboxes on sandbox hosts spread over a Ray cluster.

This folder: the backend (backend.py) and its options (options.py), the SandboxHost actor that runs on each Ray node
(host.py), the placer that starts hosts and places sandboxes on them, watching their health and
loss (placer.py), the RemoteSandbox an environment drives (sandbox.py), and a real multi-node Ray
cluster on one machine for tests and benchmarks (local_cluster.py); docs/ray.md.

Each host runs the `inner` backend (local bubblewrap, or Apptainer on HPC nodes) on its node;
the environment gets a RemoteSandbox with the same async API. In config:

    sandbox:
      backend: {kind: ray, inner: {kind: apptainer}, slots_per_host: 32, cpus_per_sandbox: 1}

Nodes offer themselves with a custom resource (`ray start ... --resources '{"prorl_sandbox_host": 1}'`),
so operators choose which nodes run sandboxes (not the GPU nodes of the trainer). The sandbox
root, the sandbox venv and the SWE repository cache must be at the same paths on every node
(a shared file system, as on HPC clusters; the root is best node-local, like /tmp).
"""
