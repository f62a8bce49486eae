# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Capture endpoints: an OpenAI-compatible base URL per rollout that a harness is pointed at.

    POST /capture                          open one (body: CaptureLimits) -> {key, base_path}
    POST /capture/{key}/v1/chat/completions  the harness's calls: forwarded, captured; as well
    POST /capture/{key}/v1/responses         in the Responses API,
    POST /capture/{key}/v1/messages          or Anthropic Messages (protocols.py)
    GET  /capture/{key}                    the record so far
    POST /capture/{key}/end                end it (later calls: 410) -> the record

The key is a secret in the path (the harness only needs a base URL, no header support), so
concurrent rollouts never see each other's calls. Calls go to the model server with the capture's
own session cookie: sticky on one policy endpoint for the whole rollout, as the built-in loop's.
The model server should be in `token_mode: tito`: then every reply carries the ids the model
produced, and a call that extends an earlier one is sent with those ids (trajectory.py).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from typing import Any

import orjson
from fastapi import APIRouter, Body, HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from nemo_gym.rollout_correlation import current_rollout_id, rollout_context

from prorl_gym.capture.protocols import CHAT, PROTOCOLS, InvalidCall, WireProtocol
from prorl_gym.capture.trajectory import CaptureLimits, CaptureRecord, CaptureRefused, Trajectory
from prorl_gym.pipeline.peers import PeerUnreachable, exchange
from prorl_gym.pipeline.policy import PolicyGate

ENDED_KEPT = 10_000  # ended captures remembered, so a late call is told 410 rather than 404
OPEN_KEPT = 10_000  # open captures at most: opening one more ends the oldest (one opened and forgotten)


class CaptureGateway:
    def __init__(self, client: Any, model_server: str, call_timeout_s: float = 600.0, gate: PolicyGate | None = None):
        self.client = client  # PeerClient: .post(server_name, url_path, json=, cookies=)
        self.model_server = model_server
        self.call_timeout_s = call_timeout_s
        self.gate = gate  # the policy's version and pause (the trainer's weight updates)
        self._open: OrderedDict[str, tuple[Trajectory, dict]] = OrderedDict()  # key -> (its calls, its cookies)
        # key -> the NeMo Gym rollout id its opener ran under: its calls carry it to the model server (PeerClient)
        self._rollout_ids: dict[str, str | None] = {}
        self._ended: OrderedDict[str, CaptureRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, limits: CaptureLimits | None = None, metadata: dict[str, str] | None = None) -> str:
        """A new capture; `metadata` goes with each of its calls that carries none (the row's, as the
        built-in loop sends it)."""
        while len(self._open) >= OPEN_KEPT:
            self.end(next(iter(self._open)))
        key = secrets.token_urlsafe(18)
        self._open[key] = (Trajectory(limits or CaptureLimits(), metadata), {})
        self._rollout_ids[key] = current_rollout_id()
        return key

    def record(self, key: str) -> CaptureRecord:
        if key in self._open:
            return self._open[key][0].record()
        if key in self._ended:
            return self._ended[key]
        raise KeyError(key)

    def end(self, key: str) -> CaptureRecord:
        """End the capture (its later calls are refused) and return its record."""
        if key in self._ended:
            return self._ended[key]
        trajectory, _ = self._open.pop(key)
        self._rollout_ids.pop(key, None)
        trajectory.ended = True
        record = self._ended[key] = trajectory.record()
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        return record

    async def chat_completions(self, key: str, body: dict, protocol: str = CHAT.name) -> tuple[int, dict]:
        """One call of the harness, as a chat completion request: (status, body to answer with)."""
        if key not in self._open:
            if key in self._ended:
                raise CaptureRefused("this rollout has ended: its capture takes no more calls", 410)
            raise CaptureRefused("no such capture (a wrong key, or one never opened)", 404)
        trajectory, cookies = self._open[key]
        trajectory.admit()
        forwarded, extends = trajectory.prepare(body)
        started = time.perf_counter()

        rollout_id = self._rollout_ids.get(key)

        async def send():
            with rollout_context(rollout_id):
                path = "/v1/chat/completions"
                return await exchange(
                    self.client, "post", self.model_server, path, forwarded, cookies, self.call_timeout_s
                )

        try:  # held while the trainer has generation paused (pipeline/policy.py): outside the timeout
            reply, version = await self.gate.call(send) if self.gate else (await send(), None)
        except TimeoutError:
            trajectory.policy_errors.append(f"the policy did not answer within {self.call_timeout_s:g}s")
            raise CaptureRefused(trajectory.policy_errors[-1], 504) from None
        except PeerUnreachable as exc:
            trajectory.policy_errors.append(f"the model server is unreachable: {exc.reason}")
            raise CaptureRefused(trajectory.policy_errors[-1], 502) from exc
        cookies.update(reply.cookies)
        payload = reply.payload
        try:
            answer = orjson.loads(payload)
        except orjson.JSONDecodeError:
            answer = {"error": {"message": payload[:2000].decode(errors="replace"), "type": "model_server_error"}}
        if reply.status != 200:
            trajectory.policy_errors.append(f"model server returned {reply.status}: {payload[:1000]!r}")
            return reply.status, answer
        if key not in self._open:  # ended while the call ran: the rollout is over, its answer is dropped
            raise CaptureRefused("this rollout ended while the call ran", 410)
        return 200, trajectory.add(forwarded, extends, answer, time.perf_counter() - started, protocol, version)

    def _route(self, protocol: WireProtocol):
        async def call(request: Request) -> Response:
            key = request.path_params["key"]
            try:  # orjson both ways, no model: this route is on every policy call of a harness
                body = orjson.loads(await request.body())
            except orjson.JSONDecodeError as exc:
                return self._error(protocol, 400, "invalid_request", f"the request body is not JSON: {exc}")
            if not isinstance(body, dict):
                return self._error(protocol, 422, "invalid_request", "the request body must be a JSON object")
            try:
                chat = protocol.to_chat(body)
                status, answer = await self.chat_completions(key, chat, protocol.name)
            except InvalidCall as exc:
                return self._error(protocol, exc.status, "invalid_request", exc.reason)
            except CaptureRefused as exc:
                return self._error(protocol, exc.status, "capture_refused", exc.reason)
            if status != 200:
                if protocol is CHAT:
                    return Response(orjson.dumps(answer), status_code=status, media_type="application/json")
                return self._error(protocol, status, "model_server_error", str(answer.get("error") or answer)[:2000])
            try:
                answer = protocol.from_chat(answer, body)
            except (ValueError, NotImplementedError, KeyError, TypeError) as exc:  # a reply it cannot express
                message = f"the policy's reply cannot be given in {protocol.name}: {exc!r}"
                return self._error(protocol, 502, "unconvertible_reply", message[:2000])
            if body.get("stream"):
                return StreamingResponse(iter(list(protocol.sse(answer, body))), media_type="text/event-stream")
            return Response(orjson.dumps(answer), media_type="application/json")

        call.__name__ = f"capture_{protocol.name}"
        return call

    @staticmethod
    def _error(protocol: WireProtocol, status: int, type_: str, message: str) -> Response:
        body = orjson.dumps(protocol.error(status, type_, message))
        return Response(body, status_code=status, media_type="application/json")

    def router(self) -> APIRouter:
        router = APIRouter()

        @router.post("/capture")
        async def open_capture(limits: CaptureLimits = Body(default_factory=CaptureLimits)) -> dict:
            key = self.open(limits)
            return {"key": key, "base_path": f"/capture/{key}/v1"}

        @router.get("/capture/{key}")
        async def get_record(key: str) -> CaptureRecord:
            try:
                return self.record(key)
            except KeyError:
                raise HTTPException(404, "no such capture") from None

        @router.post("/capture/{key}/end")
        async def end_capture(key: str) -> CaptureRecord:
            try:
                return self.end(key)
            except KeyError:
                raise HTTPException(404, "no such capture") from None

        for protocol in PROTOCOLS.values():
            # a plain route (no FastAPI parameter machinery): it is on every policy call of a harness
            router.add_route(f"/capture/{{key}}/v1/{protocol.path}", self._route(protocol), methods=["POST"])

        return router
