# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Code resources server: python, bash and a file editor in a sandbox; answers run against tests.

INIT creates the agent's sandbox; the tests stay on the server (the row), never in it.
If the row names an `answer_file`, its starter code is staged there. EVAL takes the
solution (the one fenced ```python block of the final message, or that file, read from
the agent's sandbox) and runs the tests in a FRESH sandbox with per-test time and memory
limits and a total budget (resources_servers/code/check.py). reward 1.0 iff every test
passed; pass_fraction and per-status counts go with it. A solution that hangs, forks or
floods fails its tests; a failure of the eval machinery is an eval_error.
"""

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from prorl_gym.config import StrictConfig
from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SandboxVerifyResponse,
    SeedSessionRequest,
)
from prorl_gym.sandbox import SandboxAPI, SandboxError, SandboxFileError, SandboxFileNotFound, SandboxFileTooLarge
from prorl_gym.verify.transcript import final_assistant_text
from resources_servers.code.check import (
    MAX_SOLUTION_BYTES,
    CodeLimits,
    CodeTests,
    count_tests,
    extract_code,
    no_record,
    run_tests,
)


class CodeEvalConfig(StrictConfig):
    limits: CodeLimits = Field(default_factory=CodeLimits)  # a row's `limits` override these
    max_concurrent: int = 8  # eval sandboxes at once: more would only make per-test timeouts flaky
    code_blocks: Literal["one", "last"] = "one"  # several different ```python blocks: no answer, or the last


class CodeResourcesServerConfig(SandboxResourcesServerConfig):
    eval: CodeEvalConfig = Field(default_factory=CodeEvalConfig)


class CodeTaskFields(BaseModel):
    """The row fields the server reads (the rest of the row passes through untouched)."""

    model_config = ConfigDict(extra="allow")
    tests: CodeTests  # validated at INIT: a row the test runner cannot run fails early (422)
    starter_code: str | None = None
    answer_file: str | None = None
    limits: dict[str, Any] | None = None

    @field_validator("limits")
    @classmethod
    def _limits_are_valid(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        CodeLimits().merged(value)
        return value


class CodeSeedSessionRequest(CodeTaskFields, SeedSessionRequest):
    pass


class CodeVerifyRequest(CodeTaskFields, SandboxVerifyRequest):
    pass


class CodeVerifyResponse(SandboxVerifyResponse):
    answer_problem: str | None = None  # no_code_block, multiple_code_blocks, answer_file_missing, ...
    solution_chars: int = 0
    pass_fraction: float = 0.0
    tests_total: int = 0
    tests_passed: int = 0
    test_statuses: dict[str, int] = Field(default_factory=dict)  # passed / failed / timeout / ... -> count
    reason: str | None = None  # the first failure, or why nothing ran


class CodeResourcesServer(SandboxResourcesServer):
    config: CodeResourcesServerConfig
    seed_request = CodeSeedSessionRequest
    verify_request = CodeVerifyRequest
    verify_response = CodeVerifyResponse
    _eval_slots: asyncio.Semaphore | None = None

    async def stage_task(self, sandbox: SandboxAPI, row: CodeSeedSessionRequest) -> None:
        if row.answer_file and row.starter_code:
            await sandbox.write_file(row.answer_file, row.starter_code)

    async def evaluate(self, body: CodeVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if body.answer_file:
            solution, problem = await self._read_answer_file(sandbox, body.answer_file)
        else:
            solution, problem = extract_code(final_assistant_text(body.response), self.config.eval.code_blocks)
        fields |= {"answer_problem": problem, "solution_chars": len(solution) if solution else 0}
        if solution is None:  # nothing to run: every test failed, with the same fields as a run
            total = count_tests(body.tests)
            return fields | no_record(total, problem) | {"test_statuses": {"not_run": total}}
        limits = self.config.eval.limits.merged(body.limits)
        if self._eval_slots is None:
            self._eval_slots = asyncio.Semaphore(self.config.eval.max_concurrent)
        async with self._eval_slots:
            result = await run_tests(solution, body.tests, await self.sandbox_spec(body), limits, self.backends)
        return fields | result

    async def _read_answer_file(self, sandbox: SandboxAPI | None, path: str) -> tuple[str | None, str | None]:
        if sandbox is None:  # the session's sandbox is gone (idle timeout, released): nothing to grade
            raise SandboxError("the agent's sandbox is gone: the answer file cannot be read")
        try:
            data = await sandbox.read_bytes(path)
        except SandboxFileNotFound:
            return None, "answer_file_missing"
        except SandboxFileTooLarge:
            return None, "solution_too_large"
        except SandboxFileError:
            return None, "answer_file_unreadable"
        if len(data) > MAX_SOLUTION_BYTES:
            return None, "solution_too_large"
        text = data.decode(errors="replace")
        return (text, None) if text.strip() else (None, "empty_answer_file")


if __name__ == "__main__":
    CodeResourcesServer.run_webserver()
