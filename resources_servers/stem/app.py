# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""STEM resources server: Python in a sandbox plus `search` over a reference corpus.

INIT creates the sandbox (its Python kernel starts in the background). RUN offers `python`
and `search` (BM25 over data/corpus by default, or an HTTP search API). EVAL takes the final
assistant message's \\boxed{} answer (config `boxed_answers`, as in math) and checks it against
the row's answer spec: numeric (pint units, tolerance) and choice checks run in a thread;
symbolic ones with math-verify in the verifier pool. A malformed spec is an eval_error.
"""

from __future__ import annotations

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

import asyncio
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from prorl_gym.lifespan import run_with_app
from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SandboxVerifyResponse,
    SeedSessionRequest,
)
from prorl_gym.resources.tools import Tool, ToolResult
from prorl_gym.sandbox import SandboxAPI
from prorl_gym.verify.answers import boxed_answer_of
from resources_servers.stem.check import SymbolicSpec, check_answer, parse_spec
from resources_servers.stem.search import (
    SEARCH,
    SearchArgs,
    SearchBackend,
    SearchConfig,
    SearchError,
    format_passages,
    make_backend,
)
from resources_servers.stem.symbolic import MAX_SYMBOLIC_CHARS, symbolic_answer, symbolic_gold

HERE = Path(__file__).resolve().parent


class StemResourcesServerConfig(SandboxResourcesServerConfig):
    verifier_workers: int = 2
    check: str = "prorl_gym.verify.math_check:check_math"  # symbolic answers, in the verifier workers
    boxed_answers: Literal["one", "last"] = "one"  # several different boxed answers: none, or the last
    search: SearchConfig = Field(default_factory=SearchConfig)


class StemTask(BaseModel):
    model_config = ConfigDict(extra="allow")
    answer: Any  # required at INIT; its content is checked at EVAL (a bad spec is an eval_error)


class StemSeedSessionRequest(StemTask, SeedSessionRequest):
    pass


class StemVerifyRequest(SandboxVerifyRequest):
    answer: Any = None  # validated by parse_spec, so a malformed or missing spec is an eval_error, not a 422


class StemVerifyResponse(SandboxVerifyResponse):
    answer_kind: str | None = None  # numeric, choice, symbolic
    extracted_answer: str | None = None
    answer_problem: str | None = None  # no_boxed_answer, multiple_boxed_answers, unit_mismatch, ...
    check: dict[str, Any] | None = None


class StemResourcesServer(SandboxResourcesServer):
    config: StemResourcesServerConfig
    seed_request = StemSeedSessionRequest
    verify_request = StemVerifyRequest
    verify_response = StemVerifyResponse
    _search: SearchBackend = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        self._search = make_backend(self.config.search, HERE)  # the BM25 index is built here, once
        parse_spec({"kind": "numeric", "value": 1.0, "unit": "m/s"})  # load pint's registry now, not in a rollout
        app = super().setup_webserver()
        run_with_app(app, None, self._search.close)
        return app

    @classmethod
    def environment_tools(cls) -> list[Tool]:
        return [SEARCH]

    def verifier_checks(self) -> list[str]:
        return [self.config.check]

    async def run_search(self, sandbox: SandboxAPI, args: SearchArgs) -> ToolResult:
        try:
            passages = await self._search.search(args.query, self.config.search.top_k)
        except SearchError as exc:
            return ToolResult(content=f"[search failed: {exc}]", metadata={"error": str(exc)})
        sources = [p.source for p in passages]
        return ToolResult(content=format_passages(passages), metadata={"results": len(passages), "sources": sources})

    async def evaluate(self, body: StemVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        # A malformed spec raises AnswerSpecError (a VerifierError): an eval_error, whatever the answer.
        spec = await asyncio.to_thread(parse_spec, body.answer)
        gold = await asyncio.to_thread(symbolic_gold, spec.expression) if isinstance(spec, SymbolicSpec) else None
        answer, problem = boxed_answer_of(body.response, self.config.boxed_answers)
        fields: dict[str, Any] = {"answer_kind": spec.kind, "extracted_answer": answer, "answer_problem": problem}
        if answer is None:
            return fields | {"reward": 0.0}
        if gold is None:
            result = await asyncio.to_thread(check_answer, answer, spec)
        elif len(answer) > MAX_SYMBOLIC_CHARS:
            result = {"correct": False, "score": 0.0, "problem": "answer_too_long"}
        else:
            checker = {"kind": "math_verify"}
            result = await self.verifiers.check(
                self.config.check, answer=symbolic_answer(answer), expected=gold, checker=checker
            )
        return fields | {"reward": float(result["correct"]), "answer_problem": result.get("problem"), "check": result}


if __name__ == "__main__":
    StemResourcesServer.run_webserver()
