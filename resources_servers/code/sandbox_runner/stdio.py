# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""stdin/stdout tests: each case runs the solution as a fresh process, input on stdin.

A case passes only if the process exits 0 within its time and its stdout matches the
expected output; stdout beyond the cap ends the process (an output flood is a failed
test, not a problem for the runner).
"""

from __future__ import annotations

import math
import os
import selectors
import signal
import subprocess
import time

from procs import child_limits, describe, kill_descendants

ERR_TAIL = 2048
CHUNK = 1 << 16


def run_stdio(spec: dict, budget, results: list[dict]) -> None:
    for case in spec["cases"]:
        timeout = budget.left(spec["per_test_timeout_s"])
        if timeout <= 0:
            results.append(budget.skipped())
            continue
        started = time.monotonic()
        try:
            status, detail = run_case(spec, case, timeout)
        except OSError as exc:  # cannot fork: what the solution left running holds every process slot
            status, detail = "error", f"could not start the solution: {describe(exc)}"
        kill_descendants()
        budget.record(results, {"status": status, "detail": detail, "seconds": round(time.monotonic() - started, 4)})


def run_case(spec: dict, case: dict, timeout: float) -> tuple[str, str | None]:
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        [spec["python"], spec["solution_path"]],
        cwd=spec["workdir"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=child_limits(spec["memory_bytes"], timeout),
    )
    try:
        out, err, problem = communicate(proc, case["input"].encode(), deadline, spec["max_output_bytes"])
        if problem is None:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                problem = "timeout"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    if problem == "timeout":
        return "timeout", f"no result within {timeout:.3g}s"
    if problem == "output_limit":
        return "output_limit", f"more than {spec['max_output_bytes']} bytes on stdout"
    status, detail = classify_exit(proc.returncode, err.decode(errors="replace"))
    if status is not None:
        return status, detail
    if outputs_match(out.decode(errors="replace"), case["output"], spec.get("compare", "tokens")):
        return "passed", None
    return "failed", "wrong answer"


def communicate(proc: subprocess.Popen, data: bytes, deadline: float, max_out: int) -> tuple[bytes, bytes, str | None]:
    """(stdout, stderr tail, problem): problem is None, "timeout" or "output_limit"."""
    out, err, sent = bytearray(), bytearray(), 0
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
        if data:
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        while proc.stdout in selector.get_map() or proc.stderr in selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _ in selector.select(left):
                stream = key.fileobj
                if stream is proc.stdin:
                    try:
                        sent += os.write(stream.fileno(), data[sent : sent + CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the solution stopped reading: its choice
                        sent = len(data)
                    if sent >= len(data):
                        selector.unregister(stream)
                        stream.close()
                    continue
                chunk = os.read(stream.fileno(), CHUNK)
                if not chunk:
                    selector.unregister(stream)
                elif stream is proc.stdout:
                    out += chunk
                    if len(out) > max_out:
                        return bytes(out), bytes(err), "output_limit"
                else:
                    err = (err + chunk)[-ERR_TAIL:]
    return bytes(out), bytes(err), None


def classify_exit(returncode: int, stderr: str) -> tuple[str | None, str | None]:
    """(status, detail) of an abnormal exit; (None, None) for exit status 0."""
    if returncode == 0:
        return None, None
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout", "CPU time limit" if returncode == -signal.SIGXCPU else "killed"
    if returncode < 0:
        return "crashed", f"killed by {signal.Signals(-returncode).name}"
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    if "MemoryError" in last:
        return "memory", "memory limit"
    return "error", (last or f"exit status {returncode}")[:300]


def outputs_match(actual: str, expected: str, compare: str = "tokens") -> bool:
    """lines: the same lines, trailing whitespace ignored. tokens (the default, as most judges):
    the same whitespace-separated tokens; a decimal expected token accepts 1e-6 error."""
    if _lines(actual) == _lines(expected):
        return True
    if compare == "lines":
        return False
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and all(g == w or _close(g, w) for g, w in zip(got, want))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def _close(got: str, want: str) -> bool:
    if not any(c in want for c in ".eE"):
        return False
    try:
        g, w = float(got), float(want)
    except ValueError:
        return False
    return math.isfinite(w) and math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-6)
