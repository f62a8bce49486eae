# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Math resources server: persistent Python and bash in a sandbox; answers checked in \\boxed{}.

INIT creates the sandbox (its Python kernel starts in the background). EVAL takes the final
assistant message's \\boxed{} answer (config `boxed_answers`: `one` (default) counts several
different boxed answers as none, so hedging is not rewarded; `last` takes the last one, as
most RL math pipelines do) and checks it against the row's expected answer with the row's
checker in an isolated verifier worker (config `check`, a `module:function`).
"""

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SandboxVerifyResponse,
    SeedSessionRequest,
)
from prorl_gym.sandbox import SandboxAPI
from prorl_gym.verify.answers import boxed_answer_of


class MathResourcesServerConfig(SandboxResourcesServerConfig):
    verifier_workers: int = 2
    check: str = "prorl_gym.verify.math_check:check_math"  # run in the verifier workers
    boxed_answers: Literal["one", "last"] = "one"  # several different boxed answers: none, or the last


class MathTask(BaseModel):
    """The row fields the server reads (the rest of the row passes through)."""

    model_config = ConfigDict(extra="allow")
    expected_answer: str  # checked at INIT: a row the verifier cannot use fails early
    checker: dict[str, Any] = Field(default_factory=lambda: {"kind": "math_verify"})


class MathSeedSessionRequest(MathTask, SeedSessionRequest):
    pass


class MathVerifyRequest(MathTask, SandboxVerifyRequest):
    pass


class MathVerifyResponse(SandboxVerifyResponse):
    extracted_answer: str | None = None
    answer_problem: str | None = None  # why there is no answer: no_boxed_answer, multiple_boxed_answers, ...
    check: dict[str, Any] | None = None  # the checker's detail: score, parsed answer, ...


class MathResourcesServer(SandboxResourcesServer):
    config: MathResourcesServerConfig
    seed_request = MathSeedSessionRequest
    verify_request = MathVerifyRequest
    verify_response = MathVerifyResponse

    def verifier_checks(self) -> list[str]:
        return [self.config.check]

    async def evaluate(self, body: MathVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        answer, problem = boxed_answer_of(body.response, self.config.boxed_answers)
        fields: dict[str, Any] = {"extracted_answer": answer, "answer_problem": problem}
        if answer is None:
            return fields | {"reward": 0.0}
        result = await self.verifiers.check(
            self.config.check, answer=answer, expected=body.expected_answer, checker=body.checker
        )
        return fields | {"reward": 1.0 if result["correct"] else 0.0, "check": result}


if __name__ == "__main__":
    MathResourcesServer.run_webserver()
