# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The trusted test runner inside a fresh eval sandbox.

    python -I runner.py SPEC_PATH

Reads the run's spec (tests, limits, a random nonce), deletes it, makes itself unreadable
to other processes and ends the file shell that wrote it, all before any solution code
runs. Then runs every test (stdio.py, functional.py) and, only after the last one and
after killing whatever the solution left running, prints ONE record:

    PRORL-CODE-RESULT {"nonce": ..., "tests": [{"status", "detail", "seconds"}], "runner_error": ...}

The nonce is the proof: the solution never sees it, so exiting early (sys.exit(0),
os._exit(0)), killing the runner or printing a fake record all leave no valid record,
which the server scores as failed tests.
"""

import json
import os
import sys
import time
import traceback

# Import everything now, then forget the runner directory: the solution can write there,
# and a module it plants must never be imported into this trusted process later.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from functional import run_functional
from procs import describe, harden, kill_descendants, kill_strangers
from stdio import run_stdio

del sys.path[0]

MARKER = "PRORL-CODE-RESULT"


class Budget:
    """The run's time: no test may start or run past the total; after `max_timeouts`
    timed-out tests the rest are skipped (a hanging solution would hang on each)."""

    def __init__(self, total_s: float, max_timeouts: int):
        self.deadline = time.monotonic() + total_s
        self.max_timeouts = max_timeouts
        self.timeouts = 0

    def left(self, per_test_s: float) -> float:
        if self.timeouts >= self.max_timeouts:
            return 0.0
        left = min(per_test_s, self.deadline - time.monotonic())
        return left if left > 0.05 else 0.0

    def skipped(self) -> dict:
        why = (
            f"skipped after {self.timeouts} timeouts"
            if self.timeouts >= self.max_timeouts
            else "total time budget exhausted"
        )
        return {"status": "not_run", "detail": why, "seconds": 0.0}

    def record(self, results: list[dict], result: dict) -> None:
        self.timeouts += result["status"] == "timeout"
        results.append(result)


def main() -> None:
    sys.set_int_max_str_digits(0)
    path = sys.argv[1]
    with open(path) as f:
        spec = json.load(f)
    os.unlink(path)
    record = {"nonce": spec["nonce"], "tests": [], "runner_error": None}
    try:
        harden()
        if spec["own_pid_namespace"]:
            kill_strangers()
        run = run_stdio if spec["kind"] == "stdio" else run_functional
        run(spec, Budget(spec["total_timeout_s"], spec["max_timeouts"]), record["tests"])
    except BaseException as exc:  # noqa: BLE001 - reported as a runner error, never as a result
        record["runner_error"] = describe(exc) + "\n" + traceback.format_exc()[-1500:]
    kill_descendants()  # nothing of the solution may outlive the tests, or see the record
    sys.stdout.write(f"\n{MARKER} {json.dumps(record)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
