# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The capture endpoint as NeMo Gym 0.7's token-capture transport: the clients (the server: token_ledger.py).

A 0.7 deployment names them in its `token_id_capture` block, each model-server process building its own over
the agent's URL; the collector (or a trainer) installs a source the same way:

    token_id_capture:
      enabled: true
      sink: prorl_gym.capture.nemo_gym_transport:CaptureTokenSink
      sink_kwargs: {url: "http://<agent host>:<agent port>"}
      lineage_store: prorl_gym.capture.nemo_gym_transport:CaptureLineageResolver
      lineage_store_kwargs: {url: "http://<agent host>:<agent port>"}

    nemo_gym.token_id_capture.protocols.install_token_source(CaptureTokenSource(url))

They implement TokenSink (with the optional begin_call), TokenSource and LineageResolver; NeMo Gym's
conformance kit checks them (tests/capture/test_nemo_gym_transport.py). A refusal of the ledger's (a conflicting
or late entry) raises, as the protocols ask; so does a ledger that cannot be reached.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
from nemo_gym.token_id_capture.protocols import LineageMatch, LineageResolution, TokenCaptureSnapshot
from nemo_gym.token_id_capture.records import ParentResolutionStatus, TokenEntry

from prorl_gym.errors import ProrlError
from prorl_gym.pipeline.peers import error_detail


class LedgerRefused(ProrlError):
    """The agent's token ledger refused a write (a conflicting payload, a new call after the freeze)."""


class _LedgerClient:
    def __init__(self, url: str, timeout_s: float = 30.0):
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def _post(self, rollout_id: str, action: str, body: bytes | dict | None = None) -> Any:
        if self._session is None:  # in the caller's loop, on first use
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        data = body if isinstance(body, bytes) else orjson.dumps(body or {})
        url = f"{self.url}/token_capture/{rollout_id}/{action}"
        async with self._session.post(url, data=data, headers={"Content-Type": "application/json"}) as response:
            payload = await response.read()
            if response.status == 409:
                raise LedgerRefused(error_detail(payload))
            response.raise_for_status()
            return orjson.loads(payload) if payload else None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class CaptureTokenSink(_LedgerClient):
    """TokenSink: an entry is committed when put() returns; the same entry again is a no-op."""

    async def put(self, entry: TokenEntry) -> None:
        await self._post(entry.rollout_id, "put", entry.model_dump_json().encode())

    async def mark_incomplete(self, rollout_id: str, model_call_id: str = "") -> None:
        await self._post(rollout_id, "incomplete", {"model_call_id": model_call_id})

    async def begin_call(self, rollout_id: str, model_call_id: str) -> None:
        await self._post(rollout_id, "begin", {"model_call_id": model_call_id})


class CaptureTokenSource(_LedgerClient):
    """TokenSource: freeze a rollout's records, retire exactly the snapshot consumed."""

    async def freeze(self, rollout_id: str) -> TokenCaptureSnapshot:
        frozen = await self._post(rollout_id, "freeze")
        return TokenCaptureSnapshot(
            rollout_id=rollout_id,
            entries=tuple(TokenEntry.model_validate_json(entry) for entry in frozen["entries"]),
            incomplete=frozen["incomplete"],
            snapshot_id=frozen["snapshot_id"],
            version=frozen["version"],
        )

    async def drop(self, rollout_id: str, *, snapshot_id: str, version: int) -> bool:
        return (await self._post(rollout_id, "drop", {"snapshot_id": snapshot_id, "version": version}))["retired"]


class CaptureLineageResolver(_LedgerClient):
    """LineageResolver over the committed entries (NeMo Gym's matcher, in the agent)."""

    async def resolve(self, rollout_id: str, request_items: list[dict]) -> LineageResolution:
        found = await self._post(rollout_id, "resolve", {"request_items": request_items})
        match = found["match"]
        return LineageResolution(
            ParentResolutionStatus(found["status"]),
            match=None
            if match is None
            else LineageMatch(
                model_call_id=match["model_call_id"],
                cumulative_token_ids=tuple(match["cumulative_token_ids"]),
                digest=match["digest"],
                staging_chain=tuple(match["staging_chain"]),
                prev_len=match["prev_len"],
                chain_hash=match["chain_hash"],
            ),
            reason=found["reason"],
        )

    def is_process_shared(self) -> bool:
        return True  # every model-server worker resolves against the one ledger
