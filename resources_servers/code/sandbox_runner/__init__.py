# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The test runner that runs INSIDE the eval sandbox (stdlib only, run by the sandbox's Python).

runner.py      trusted: reads the tests, runs them, prints the one result record
procs.py       hardening, limits, killing what a solution leaves running
stdio.py       stdin/stdout cases; functional.py: function tests (trusted side)
worker.py      untrusted side: hosts the solution for function tests, answers calls
wire.py        the plain-data codec between the two

The server copies these files into each fresh eval sandbox (see resources_servers/code/check.py).
"""

from pathlib import Path

RUNNER_DIR = Path(__file__).resolve().parent
FILES = ("runner.py", "procs.py", "stdio.py", "functional.py", "worker.py", "wire.py")
