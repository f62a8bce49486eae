# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Math resources server: persistent Python and bash in a sandbox; answers checked in \\boxed{}.

INIT creates the sandbox (the Python kernel starts on first use). EVAL takes the final
assistant message, requires exactly one distinct \\boxed{} answer (none, or several
different ones, is a wrong answer, not an error), and checks it against the row's
expected answer with the row's checker in an isolated verifier worker.
"""

from typing import Any

from fastapi import Request
from pydantic import Field

from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SeedSessionRequest,
)
from prorl_gym.resources.transcript import count_tool_calls, final_assistant_text
from prorl_gym.sandbox import Sandbox
from prorl_gym.verify.answers import final_boxed_answer


class MathResourcesServerConfig(SandboxResourcesServerConfig):
    tools: list[str] = Field(default_factory=lambda: ["python", "bash"])
    verifier_workers: int = 2


class MathSeedSessionRequest(SeedSessionRequest):
    expected_answer: str  # checked at INIT: a row the verifier cannot use fails early
    checker: dict[str, Any] = Field(default_factory=lambda: {"kind": "math_verify"})


class MathVerifyRequest(SandboxVerifyRequest):
    expected_answer: str
    checker: dict[str, Any] = Field(default_factory=lambda: {"kind": "math_verify"})


class MathResourcesServer(SandboxResourcesServer):
    config: MathResourcesServerConfig

    async def seed_session(self, request: Request, body: MathSeedSessionRequest):
        return await super().seed_session(request, body)

    async def stage_task(self, sandbox: Sandbox, row: SeedSessionRequest) -> None:
        pass  # nothing to stage: the question is in the prompt

    async def verify(self, request: Request, body: MathVerifyRequest):
        return await super().verify(request, body)

    async def evaluate(self, body: MathVerifyRequest, sandbox: Sandbox | None) -> dict[str, Any]:
        answer, problem = final_boxed_answer(final_assistant_text(body.response))
        fields: dict[str, Any] = {
            "extracted_answer": answer,
            "answer_problem": problem,
            "num_tool_calls": count_tool_calls(body.response),
        }
        if answer is None:
            return fields | {"reward": 0.0}
        result = await self.verifiers.check("math", answer=answer, expected=body.expected_answer, checker=body.checker)
        return fields | {"reward": 1.0 if result["correct"] else 0.0, "check": result}


if __name__ == "__main__":
    MathResourcesServer.run_webserver()
