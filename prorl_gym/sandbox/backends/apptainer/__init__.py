# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `apptainer` backend: sandboxes as Apptainer (or SingularityCE) instances, for HPC
(backend.py, its options in options.py): Apptainer's command line as the backend drives it
(cli.py), and its images, pulled on first use or ahead of time for a whole dataset (pull.py:
`python -m prorl_gym.sandbox.backends.apptainer.pull`); docs/hpc.md."""
