# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The capture endpoint as NeMo Gym 0.7's token-capture transport: the server side.

NeMo Gym 0.7 records a rollout's model calls as TokenEntry records through three protocols
(nemo_gym/token_id_capture/protocols.py): a TokenSink that stores them, a TokenSource that freezes
and retires a rollout's records, a LineageResolver that finds the call a request continues. A
framework may carry them elsewhere than Gym's files (an "external transport"), and Gym's conformance
kit checks one. Here the agent holds them, per rollout, in memory, and serves them over HTTP beside its
capture endpoint (routes below); the clients (nemo_gym_transport.py) are what a 0.7 deployment names in
its `token_id_capture` block, and every client over one agent sees the same records.

    POST /token_capture/{rollout}/put          a TokenEntry (JSON) -> 204; 409 if it conflicts or is late
    POST /token_capture/{rollout}/incomplete   {model_call_id} -> 204 (also after a freeze)
    POST /token_capture/{rollout}/begin        {model_call_id} -> 204 (the pre-dispatch intent)
    POST /token_capture/{rollout}/freeze       -> {entries, incomplete, snapshot_id, version}
    POST /token_capture/{rollout}/drop         {snapshot_id, version} -> {retired}
    POST /token_capture/{rollout}/resolve      {request_items} -> the lineage resolution

A write is durable (for this process) and visible to every client when it is answered. The fence is
hard: a new call's entry after a freeze is refused (409), so a frozen snapshot stays what it was; a
failure marker still lands and moves the version, so a retirement of the older snapshot fails. Lineage
is NeMo Gym's own matcher (RolloutLineage), fed the committed entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import APIRouter, HTTPException, Request, Response
from nemo_gym.token_id_capture.lineage import RolloutLineage
from nemo_gym.token_id_capture.records import TokenEntry
from pydantic import BaseModel, ConfigDict, ValidationError

KEPT = 100_000  # rollouts held at most: the oldest is forgotten beyond (a consumer that never retired it)


class CallId(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a body that names other fields is a client's mistake: 422
    model_call_id: str = ""


class Retirement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    snapshot_id: str
    version: int


class Continuation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_items: list[dict]


@dataclass
class _Rollout:
    entries: dict[str, bytes] = field(default_factory=dict)  # call id -> the entry as it was put
    lineage: RolloutLineage = field(default_factory=RolloutLineage)
    failed: list[str] = field(default_factory=list)  # calls marked incomplete
    intents: set[str] = field(default_factory=set)  # calls begun, none committed yet
    version: int = 0
    frozen: bool = False


class TokenLedger:
    """Every rollout's committed entries, failure markers and intents, until a consumer retires them."""

    def __init__(self, kept: int = KEPT):
        self.kept = kept
        self._rollouts: dict[str, _Rollout] = {}

    def _rollout(self, rollout_id: str) -> _Rollout:
        if (rollout := self._rollouts.get(rollout_id)) is None:
            while len(self._rollouts) >= self.kept:
                del self._rollouts[next(iter(self._rollouts))]
            rollout = self._rollouts[rollout_id] = _Rollout()
        return rollout

    def put(self, rollout_id: str, payload: bytes) -> None:
        """Commit one entry; the same bytes again are a no-op. ValueError: another payload under its call id, or
        a new call after the freeze (the consumer has its snapshot)."""
        entry = TokenEntry.model_validate_json(payload)
        if entry.rollout_id != rollout_id:
            raise ValueError(f"the entry is of rollout {entry.rollout_id!r}, not {rollout_id!r}")
        rollout = self._rollout(rollout_id)
        if (known := rollout.entries.get(entry.model_call_id)) is not None:
            if known != payload:
                raise ValueError(f"model call {entry.model_call_id} was committed with another payload")
            return
        if rollout.frozen:
            raise ValueError(f"rollout {rollout_id} is frozen: a new call's entry comes too late")
        rollout.lineage.add_entry(entry)
        rollout.entries[entry.model_call_id] = payload
        rollout.intents.discard(entry.model_call_id)
        rollout.version += 1

    def mark_incomplete(self, rollout_id: str, model_call_id: str) -> None:
        rollout = self._rollout(rollout_id)
        rollout.failed.append(model_call_id)
        rollout.version += 1

    def begin_call(self, rollout_id: str, model_call_id: str) -> None:
        rollout = self._rollout(rollout_id)
        if model_call_id not in rollout.entries:
            rollout.intents.add(model_call_id)
            rollout.version += 1

    def freeze(self, rollout_id: str) -> dict:
        """The rollout's records as they are: the same snapshot again while nothing changes."""
        rollout = self._rollout(rollout_id)
        rollout.frozen = True
        return {
            "entries": [rollout.entries[call_id].decode() for call_id in sorted(rollout.entries)],
            "incomplete": bool(rollout.failed or rollout.intents),
            "snapshot_id": f"{rollout_id}@{rollout.version}",
            "version": rollout.version,
        }

    def drop(self, rollout_id: str, snapshot_id: str, version: int) -> bool:
        """Retire the rollout if it is still exactly the snapshot consumed."""
        rollout = self._rollouts.get(rollout_id)
        if rollout is None or version != rollout.version or snapshot_id != f"{rollout_id}@{rollout.version}":
            return False
        del self._rollouts[rollout_id]
        return True

    def resolve(self, rollout_id: str, request_items: list[dict]) -> dict:
        rollout = self._rollouts.get(rollout_id) or _Rollout()
        resolution = rollout.lineage.resolve(request_items)
        match = resolution.match
        return {
            "status": resolution.status.value,
            "reason": resolution.reason,
            "match": None
            if match is None
            else {
                "model_call_id": match.model_call_id,
                "cumulative_token_ids": list(match.cumulative_token_ids),
                "digest": match.digest,
                "staging_chain": list(match.staging_chain),
                "prev_len": match.prev_len,
                "chain_hash": match.chain_hash,
            },
        }

    def router(self) -> APIRouter:
        router = APIRouter()

        @router.post("/token_capture/{rollout_id}/put", status_code=204)
        async def put(rollout_id: str, request: Request) -> Response:
            try:
                self.put(rollout_id, await request.body())
            except ValidationError as exc:
                raise HTTPException(422, f"not a TokenEntry: {exc.errors()[:3]}") from None
            except ValueError as exc:
                raise HTTPException(409, str(exc)) from None
            return Response(status_code=204)

        @router.post("/token_capture/{rollout_id}/incomplete", status_code=204)
        async def incomplete(rollout_id: str, body: CallId) -> Response:
            self.mark_incomplete(rollout_id, body.model_call_id)
            return Response(status_code=204)

        @router.post("/token_capture/{rollout_id}/begin", status_code=204)
        async def begin(rollout_id: str, body: CallId) -> Response:
            self.begin_call(rollout_id, body.model_call_id)
            return Response(status_code=204)

        @router.post("/token_capture/{rollout_id}/freeze")
        async def freeze(rollout_id: str) -> dict:
            return self.freeze(rollout_id)

        @router.post("/token_capture/{rollout_id}/drop")
        async def drop(rollout_id: str, body: Retirement) -> dict:
            return {"retired": self.drop(rollout_id, body.snapshot_id, body.version)}

        @router.post("/token_capture/{rollout_id}/resolve")
        async def resolve(rollout_id: str, body: Continuation) -> dict:
            return self.resolve(rollout_id, body.request_items)

        return router
