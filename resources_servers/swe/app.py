# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE resources server: fix a real repository's bug with bash and an editor, then submit.

INIT prepares the task's repository at its base commit (built once from its recipe and
cached on the host, or a given directory; or the repository inside an image for the
apptainer backend; see repos.py), binds it read-only into a fresh sandbox and copies it
into the workspace, so the agent works on its own copy with only the base commit in its
git history. Tools: bash, editor, submit. EVAL takes the agent's
diff against the base commit and scores it SWE-bench style in a *fresh* sandbox (the
agent's own one is never trusted): what the patch may not change dropped, test_patch applied,
FAIL_TO_PASS and PASS_TO_PASS run renamed under a guard, the grade decided outside the test
process (see evaluate.py, and README's threat model). Reward 1.0 iff every listed test passes.
"""

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from prorl_gym.paths import REPO_ROOT
from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SandboxVerifyResponse,
    SeedSessionRequest,
)
from prorl_gym.sandbox import SandboxAPI, SandboxSpec
from prorl_gym.verify.pool import VerifierError
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import (
    RepoPrepError,
    prepare_repo,
    prepare_test_env,
    repo_env,
    stage_repo,
    task_spec,
)
from resources_servers.swe.steps import agent_diff


class SweResourcesServerConfig(SandboxResourcesServerConfig):
    repo_cache_dir: str = "data/swe/cache"  # relative to the repository root
    eval_timeout_s: float = 600.0
    # Refuse to grade (an eval error, decided before the run) where the kernel cannot seal a test run with
    # Landlock ABI 6 (signal scoping). Off: such runs are graded with what the kernel has (`sealed` in the result).
    require_sealed_run: bool = False


class SweTask(SeedSessionRequest):
    instance_id: str
    base_commit: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    test_patch: str = ""
    environment: dict[str, Any] = Field(default_factory=dict)
    # How FAIL_TO_PASS / PASS_TO_PASS ids run; None (SWE-bench's rows): what SWE-bench's harness runs for the row's
    # repository and version (official.runner_of: Django's runtests.py, SymPy's bin/test, else pytest).
    test_runner: Literal["pytest", "unittest", "django", "sympy"] | None = None

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value  # SWE-bench stores them as JSON strings


class SweVerifyRequest(SandboxVerifyRequest, SweTask):
    pass


class SweVerifyResponse(SandboxVerifyResponse):
    resolved: bool = False
    reason: str | None = None  # why not resolved: empty patch, does not apply, tests failed, ...
    patch_bytes: int = 0
    patch_applied: bool = False
    fail_to_pass_total: int = 0
    fail_to_pass_passed: int = 0
    pass_to_pass_total: int = 0
    pass_to_pass_passed: int = 0
    failed_tests: list[str] = Field(default_factory=list)
    test_runner: str | None = None
    runner_tampered: bool = False  # the run's canaries, events or files say its outcomes were made up
    tamper_evidence: list[str] = Field(default_factory=list)
    dropped: dict[str, str] = Field(default_factory=dict)  # path -> why that part of the patch was not applied
    test_files_dropped: list[str] = Field(default_factory=list)  # the dropped paths
    tool_config: list[str] = Field(default_factory=list)  # files that configure tools via HOME: never read
    canaries: dict[str, Any] = Field(default_factory=dict)  # renamed tests, controls, uncovered ids
    screened: list[str] = Field(default_factory=list)  # what the static screen found in the patch's code
    sealed: int | None = None  # the Landlock ABI the test run was sealed with (0: none on this kernel)
    test_notes: dict[str, str] = Field(default_factory=dict)  # test id -> why its outcome was not a pass


class SweResourcesServer(SandboxResourcesServer):
    config: SweResourcesServerConfig
    seed_request = SweTask
    verify_request = SweVerifyRequest
    verify_response = SweVerifyResponse

    @property
    def cache_dir(self) -> Path:
        return REPO_ROOT / self.config.repo_cache_dir

    async def sandbox_spec(self, row: SweTask) -> SandboxSpec:
        return task_spec(self.config.sandbox, row, *await self._prepared(row))

    async def _prepared(self, row: SweTask) -> tuple[Path | None, Path | None]:
        """The row's repository and test environment on the host (built on first use, then cached)."""
        python = self.config.sandbox.kernel_python
        return await prepare_repo(row, self.cache_dir), await prepare_test_env(row, python, self.cache_dir)

    async def stage_task(self, sandbox: SandboxAPI, row: SweTask) -> None:
        await stage_repo(sandbox, row)

    async def evaluate(self, body: SweVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        try:
            repo_path = repo_env(body, self.config.sandbox.workspace).repo_path
            patch = await agent_diff(sandbox, body.base_commit, repo_path) if sandbox is not None else ""
            repo_dir, test_env = await self._prepared(body)
        except RepoPrepError as exc:  # the task's repository cannot be built: the eval machinery failed
            raise VerifierError(str(exc)) from exc
        spec, timeout = self.config.sandbox, self.config.eval_timeout_s
        return await evaluate_patch(
            body,
            patch,
            spec,
            repo_dir,
            timeout,
            test_env=test_env,
            backends=self.backends,
            require_sealed=self.config.require_sealed_run,
        )


if __name__ == "__main__":
    SweResourcesServer.run_webserver()
