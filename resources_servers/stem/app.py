# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""STEM resources server: Python in a sandbox plus `search` over a reference corpus.

INIT creates the sandbox (the Python kernel starts on first use). RUN offers `python` and
`search` (BM25 over data/corpus by default, or an HTTP search API). EVAL takes the final
assistant message, requires exactly one distinct \\boxed{} answer, and checks it against the
row's answer spec: numeric (pint units, tolerance) and choice checks run in a thread;
symbolic ones with math-verify in the verifier pool. A malformed spec is an eval_error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from pydantic import Field, PrivateAttr, field_validator

from prorl_gym.lifespan import run_with_app
from prorl_gym.resources.server import (
    SandboxResourcesServer,
    SandboxResourcesServerConfig,
    SandboxVerifyRequest,
    SeedSessionRequest,
)
from prorl_gym.resources.tools import Tool, ToolArgs, ToolResult
from prorl_gym.resources.transcript import count_tool_calls, final_assistant_text
from prorl_gym.sandbox import Sandbox
from prorl_gym.verify.answers import final_boxed_answer
from prorl_gym.verify.stem_check import SymbolicSpec, check_answer, parse_spec
from resources_servers.stem.search import SearchBackend, SearchConfig, SearchError, format_passages, make_backend
from resources_servers.stem.symbolic import MAX_SYMBOLIC_CHARS, symbolic_answer, symbolic_gold

HERE = Path(__file__).resolve().parent


class StemResourcesServerConfig(SandboxResourcesServerConfig):
    tools: list[str] = Field(default_factory=lambda: ["python", "search"])
    verifier_workers: int = 2
    search: SearchConfig = Field(default_factory=SearchConfig)


class StemSeedSessionRequest(SeedSessionRequest):
    answer: Any  # required at INIT; its content is checked at EVAL (a bad spec is an eval_error)


class StemVerifyRequest(SandboxVerifyRequest):
    answer: Any = None  # validated by parse_spec, so a malformed or missing spec is an eval_error, not a 422


class SearchArgs(ToolArgs):
    query: str = Field(description="Keywords or a question to look up.")

    @field_validator("query")
    @classmethod
    def _query(cls, query: str) -> str:
        # Checked here, not as minLength/maxLength: strict function schemas do not allow those keywords.
        if not query.strip() or len(query) > 500:
            raise ValueError("query must be 1 to 500 characters")
        return query


class StemResourcesServer(SandboxResourcesServer):
    config: StemResourcesServerConfig
    _search: SearchBackend = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        self._search = make_backend(self.config.search, HERE)  # the BM25 index is built here, once
        parse_spec({"kind": "numeric", "value": 1.0, "unit": "m/s"})  # load pint's registry now, not in a rollout
        app = super().setup_webserver()
        run_with_app(app, None, self._search.close)
        return app

    def extra_tools(self) -> list[Tool]:
        return [
            Tool(
                name="search",
                description=(
                    "Search the reference library (physics, chemistry, biology, engineering: constants, "
                    "definitions, formulas, data tables). Returns the best-matching passages with their titles."
                ),
                args=SearchArgs,
                run=self._run_search,
            )
        ]

    async def _run_search(self, sandbox: Sandbox, args: SearchArgs) -> ToolResult:
        try:
            passages = await self._search.search(args.query, self.config.search.top_k)
        except SearchError as exc:
            return ToolResult(content=f"[search failed: {exc}]", metadata={"error": str(exc)})
        sources = [p.source for p in passages]
        return ToolResult(content=format_passages(passages), metadata={"results": len(passages), "sources": sources})

    async def seed_session(self, request: Request, body: StemSeedSessionRequest):
        return await super().seed_session(request, body)

    async def stage_task(self, sandbox: Sandbox, row: SeedSessionRequest) -> None:
        pass  # nothing to stage: the question is in the prompt, the corpus behind `search`

    async def verify(self, request: Request, body: StemVerifyRequest):
        return await super().verify(request, body)

    async def evaluate(self, body: StemVerifyRequest, sandbox: Sandbox | None) -> dict[str, Any]:
        # A malformed spec raises AnswerSpecError (a VerifierError): an eval_error, whatever the answer.
        spec = await asyncio.to_thread(parse_spec, body.answer)
        gold = await asyncio.to_thread(symbolic_gold, spec.expression) if isinstance(spec, SymbolicSpec) else None
        answer, problem = final_boxed_answer(final_assistant_text(body.response))
        fields: dict[str, Any] = {
            "answer_kind": spec.kind,
            "extracted_answer": answer,
            "answer_problem": problem,
            "num_tool_calls": count_tool_calls(body.response),
        }
        if answer is None:
            return fields | {"reward": 0.0}
        if gold is None:
            result = await asyncio.to_thread(check_answer, answer, spec)
        elif len(answer) > MAX_SYMBOLIC_CHARS:
            result = {"correct": False, "score": 0.0, "problem": "answer_too_long"}
        else:
            checker = {"kind": "math_verify"}
            result = await self.verifiers.check("math", answer=symbolic_answer(answer), expected=gold, checker=checker)
        return fields | {"reward": float(result["correct"]), "answer_problem": result.get("problem"), "check": result}


if __name__ == "__main__":
    StemResourcesServer.run_webserver()
