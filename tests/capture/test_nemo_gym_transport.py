# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The capture endpoint as NeMo Gym 0.7's external token-capture transport passes NeMo Gym's own conformance
kit (nemo_gym/token_id_capture/conformance.py): its clients, fresh ones for each check, over one ledger served
over real HTTP as the agent serves it. NeMo Gym's config loader builds them as a deployment names them, and a
ledger that breaks one rule fails the kit (so passing it says something)."""

from __future__ import annotations

import aiohttp
import pytest
from fastapi import FastAPI
from nemo_gym.token_id_capture.config import TokenIdCaptureConfig
from nemo_gym.token_id_capture.conformance import ConformanceError, run_conformance
from nemo_gym.token_id_capture.protocols import LineageResolver, TokenSink

from prorl_gym.capture.nemo_gym_transport import CaptureLineageResolver, CaptureTokenSink, CaptureTokenSource
from prorl_gym.capture.token_ledger import TokenLedger
from prorl_gym.testing import served_app

CHECKS = [
    "put_then_freeze_visibility",
    "idempotent_reput",
    "conflicting_reput",
    "mark_incomplete_durability",
    "freeze_idempotency",
    "post_freeze_write_safety",
    "conditional_retirement",
    "lineage_visibility",
    "fresh_client_lineage_visibility",
    "begin_call_custody",
]


def served(ledger: TokenLedger):
    app = FastAPI()
    app.include_router(ledger.router())
    return served_app(app)


async def conformance(url: str) -> list[str]:
    return await run_conformance(
        lambda: CaptureTokenSink(url), lambda: CaptureTokenSource(url), lambda: CaptureLineageResolver(url)
    )


async def test_the_capture_endpoints_transport_passes_nemo_gyms_conformance_kit():
    async with served(TokenLedger()) as url:
        assert await conformance(url) == CHECKS


def test_nemo_gym_builds_the_clients_as_a_deployment_names_them():
    url = "http://127.0.0.1:9"
    module = "prorl_gym.capture.nemo_gym_transport"
    config = TokenIdCaptureConfig.model_validate(
        {
            "token_id_capture": {
                "enabled": True,
                "sink": f"{module}:CaptureTokenSink",
                "sink_kwargs": {"url": url},
                "lineage_store": f"{module}:CaptureLineageResolver",
                "lineage_store_kwargs": {"url": url},
            }
        }
    )
    sink, lineage = config.build_sink(), config.build_lineage_store()
    assert isinstance(sink, TokenSink) and isinstance(lineage, LineageResolver) and lineage.is_process_shared()


class Forgetful(TokenLedger):
    """Retires whatever snapshot it is asked to, stale or not: evidence lost under a write that raced it."""

    def drop(self, rollout_id: str, snapshot_id: str, version: int) -> bool:
        return self._rollouts.pop(rollout_id, None) is not None


async def test_a_ledger_that_breaks_a_rule_fails_the_kit():
    async with served(Forgetful()) as url:
        with pytest.raises(ConformanceError, match="mark_incomplete_durability"):
            await conformance(url)


async def test_the_ledgers_routes_refuse_a_malformed_body_with_the_reason():
    bodies = [b"{not json", b"[1, 2, 3]", b'{"unexpected": {"deep": [null]}}']
    async with served(TokenLedger()) as url, aiohttp.ClientSession() as http:
        for route in ("put", "incomplete", "begin", "drop", "resolve"):
            for body in bodies:
                headers = {"content-type": "application/json"}
                async with http.post(f"{url}/token_capture/r-1/{route}", data=body, headers=headers) as response:
                    assert 400 <= response.status < 500 and await response.text(), (route, body, response.status)
