# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Code answer checking: extract the solution, run its tests in a FRESH sandbox, score.

The tests never enter the agent's sandbox. At EVAL a new sandbox is created from the
server's spec with small limits (no network, few processes, bounded memory, disk and
time); the test runner (resources_servers/code/sandbox_runner, stdlib only) is copied in with the
solution and a spec holding the tests and a random nonce. The trusted runner deletes the
spec before any solution code runs and prints one record, carrying the nonce, only after
the last test. No record with the right nonce (the solution exited early, killed the
runner, flooded, hung) means failed tests with a reason; a failure of the machinery
itself (no sandbox, a runner error, a broken row) raises SandboxError/VerifierError,
which the server records as eval_error, never as reward 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from prorl_gym.config import StrictConfig
from prorl_gym.sandbox import Backends, SandboxError, SandboxFileError, SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import ResourceLimits
from prorl_gym.verify.pool import VerifierError
from resources_servers.code.sandbox_runner import FILES, RUNNER_DIR

MiB = 1 << 20
MARKER = "PRORL-CODE-RESULT"
RUNNER_IN_SANDBOX = "/tmp/.prorl-runner"  # inside the eval sandbox
MAX_SOLUTION_BYTES = 256 * 1024
SANDBOX_GRACE_S = 15.0  # on top of the total budget: sandbox start, runner start, clean-up
PYTHON_TAGS = {"python", "py", "python3"}


class StdioCase(BaseModel):
    input: str
    output: str


class StdioTests(BaseModel):
    kind: Literal["stdio"]
    cases: list[StdioCase] = Field(min_length=1)
    compare: Literal["tokens", "lines"] = "tokens"


class FunctionalTests(BaseModel):
    kind: Literal["functional"]
    entry_point: str  # the solution's function, or "Class().method" (a fresh instance per call)
    prelude: str = ""  # run before the solution and before the tests (HumanEval: the prompt)
    setup: str = ""  # test side only (imports, helpers of the asserts)
    asserts: list[str] = Field(default_factory=list)  # one test each; `candidate` is the entry point
    code: str | None = None  # or: code defining check(candidate), one test

    @model_validator(mode="after")
    def _tests_compile(self) -> FunctionalTests:
        if bool(self.asserts) == bool(self.code):
            raise ValueError("give exactly one of `asserts` (non-empty) or `code`")
        for source in (self.prelude, self.setup, self.code or "", *self.asserts):
            try:
                compile(source, "<tests>", "exec")  # a broken row fails at INIT, not as reward 0
            except SyntaxError as exc:
                raise ValueError(f"test code does not compile: {exc}") from None
        return self


CodeTests = Annotated[StdioTests | FunctionalTests, Field(discriminator="kind")]


class CodeLimits(StrictConfig):  # a typo in a row's limits is an error, not a no-op
    """Server config sets these; a row's `limits` may override any of them."""

    per_test_timeout_s: float = Field(6.0, gt=0)
    total_timeout_s: float = Field(60.0, gt=0)
    memory_mb: int = Field(1024, ge=64)  # address space per solution process
    max_output_mb: float = Field(4.0, gt=0)  # stdout per stdio case
    max_timeouts: int = Field(2, ge=1)  # then the remaining tests are skipped (a hang would cost each its timeout)
    processes: int = Field(64, ge=8)  # the whole eval sandbox: a fork bomb hits this
    disk_mb: int = Field(256, ge=16)  # workspace and /tmp, each

    def merged(self, override: dict[str, Any] | None) -> CodeLimits:
        return CodeLimits.model_validate(self.model_dump() | (override or {}))


# ---------------------------------------------------------------- extraction

_FENCE = re.compile(r"^ {0,3}```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL)


def extract_code(text: str, policy: Literal["one", "last"] = "one") -> tuple[str | None, str | None]:
    """(code, problem) from the final message: its fenced ```python block.

    Blocks tagged python/py/python3 count; untagged ones only if there is no tagged one.
    policy "one" (the prompt asks for exactly one): several different blocks are no
    answer, since hedging must not be rewarded; "last" takes the last.
    """
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    candidates = [body for tag, body in blocks if tag in PYTHON_TAGS] or [body for tag, body in blocks if not tag]
    if not candidates:
        return None, "no_code_block"
    distinct = list(dict.fromkeys(c.strip("\n") for c in candidates))
    if len(distinct) > 1 and policy == "one":
        return None, "multiple_code_blocks"
    code = distinct[-1]
    if not code.strip():
        return None, "empty_code_block"
    if len(code.encode()) > MAX_SOLUTION_BYTES:
        return None, "solution_too_large"
    return code + "\n", None


# ---------------------------------------------------------------- running


def eval_sandbox_spec(base: SandboxSpec, limits: CodeLimits) -> SandboxSpec:
    """The agent's sandbox kind (backend, image, binds), with the eval's own small limits."""
    memory = limits.memory_mb * MiB
    return base.model_copy(
        update={
            "network": False,
            "limits": ResourceLimits(
                cpu_time_s=int(limits.total_timeout_s + SANDBOX_GRACE_S),
                memory_bytes=memory + 512 * MiB,  # the runner holds the tests: a little above a solution's
                processes=limits.processes,
                file_size_bytes=limits.disk_mb * MiB,
                open_files=1024,
                workspace_bytes=limits.disk_mb * MiB,
                tmp_bytes=limits.disk_mb * MiB,
            ),
            "output_limit_bytes": 8 * MiB,
            "command_timeout_s": limits.total_timeout_s + SANDBOX_GRACE_S,
            # One BLAS thread: a solution importing numpy must not need a thread per core.
            "env": base.env | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        },
        deep=True,
    )


def _runner_files() -> dict[str, bytes]:
    return {name: (RUNNER_DIR / name).read_bytes() for name in FILES}


async def run_tests(
    solution: str,
    tests: StdioTests | FunctionalTests,
    base: SandboxSpec,
    limits: CodeLimits,
    backends: Backends | None = None,
) -> dict[str, Any]:
    """Run `solution` against `tests` in a fresh sandbox, started through `backends` (a server's own;
    default: the process's); the scored result (see summarize)."""
    nonce = secrets.token_hex(16)
    spec = eval_sandbox_spec(base, limits)
    files = await asyncio.to_thread(_runner_files)
    sandbox = await create_sandbox(spec, backends=backends)  # SandboxError propagates: an eval error
    run_spec = tests.model_dump() | {
        "nonce": nonce,
        # Own pid namespace (bwrap, apptainer --containall): the runner may end every process
        # but its own line. Without isolation it sees the host's processes: never.
        "own_pid_namespace": sandbox.own_pid_namespace,
        "python": spec.kernel_python,
        "runner_dir": RUNNER_IN_SANDBOX,
        "workdir": spec.workspace,
        "solution_path": f"{spec.workspace}/solution.py",
        "per_test_timeout_s": limits.per_test_timeout_s,
        "total_timeout_s": limits.total_timeout_s,
        "max_timeouts": limits.max_timeouts,
        "memory_bytes": limits.memory_mb * MiB,
        "max_output_bytes": int(limits.max_output_mb * MiB),
    }
    try:
        spec_json = await asyncio.to_thread(json.dumps, run_spec)
        try:
            for name, data in files.items():
                await sandbox.write_file(f"{RUNNER_IN_SANDBOX}/{name}", data)
            await sandbox.write_file(run_spec["solution_path"], solution)
            await sandbox.write_file(f"{RUNNER_IN_SANDBOX}/spec.json", spec_json)
        except SandboxFileError as exc:  # e.g. tests beyond the file API's size: the row, not the solution
            raise VerifierError(f"could not stage the tests: {exc}") from exc
        try:
            result = await sandbox.bash(
                f"{spec.kernel_python} -I {RUNNER_IN_SANDBOX}/runner.py {RUNNER_IN_SANDBOX}/spec.json 2>/dev/null",
                timeout=spec.command_timeout_s,
            )
        except SandboxError as exc:  # only the solution ran in there: it broke the sandbox
            return no_record(count_tests(tests), f"the sandbox broke during the run: {exc}")
    finally:
        await sandbox.close()
    record = find_record(result.output, nonce)
    if record is None:
        why = "the run did not finish in time" if result.timed_out else "the run ended without a result"
        reason = (
            f"{why} (exit {result.exit_code}): the solution killed or stopped the test runner, or broke the sandbox"
        )
        return no_record(count_tests(tests), reason)
    if record.get("runner_error"):
        raise VerifierError(f"code test runner failed: {record['runner_error']}")
    return summarize(record["tests"])


def find_record(output: str, nonce: str) -> dict | None:
    """The runner's record: the marker line whose nonce matches (anything else is noise
    the solution may have written)."""
    for line in output.splitlines():
        if not line.startswith(MARKER + " "):
            continue
        try:
            record = json.loads(line[len(MARKER) + 1 :])
        except ValueError:
            continue
        if isinstance(record, dict) and secrets.compare_digest(str(record.get("nonce")).encode(), nonce.encode()):
            return record
    return None


def summarize(tests: list[dict]) -> dict[str, Any]:
    """reward 1.0 iff every test passed; pass_fraction; counts per status; the first failure."""
    passed = sum(1 for t in tests if t["status"] == "passed")
    first = next((t for t in tests if t["status"] != "passed"), None)
    return {
        "reward": 1.0 if tests and passed == len(tests) else 0.0,
        "tests_passed": passed,
        "tests_total": len(tests),
        "pass_fraction": passed / len(tests) if tests else 0.0,
        "test_statuses": dict(Counter(t["status"] for t in tests)),
        "reason": None if first is None else f"{first['status']}: {first.get('detail') or ''}".strip(": ")[:500],
        "test_seconds": round(sum(t.get("seconds", 0.0) for t in tests), 4),
    }


def count_tests(tests: StdioTests | FunctionalTests) -> int:
    if isinstance(tests, StdioTests):
        return len(tests.cases)
    return len(tests.asserts) or 1


def no_record(total: int, reason: str) -> dict[str, Any]:
    """No proof that any test ran to the end: every test failed."""
    return {
        "reward": 0.0,
        "tests_passed": 0,
        "tests_total": total,
        "pass_fraction": 0.0,
        "test_statuses": {"no_result": total},
        "reason": reason,
        "test_seconds": None,
    }
