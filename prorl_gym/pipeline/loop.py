# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The multi-turn loop (RUN stage): policy -> tool calls -> tool results -> ... until done.

In the style of mini-swe-agent: `run` repeats `step`; `step` = `query` the policy, then
`execute` each tool call; the loop ends by raising. `Finished` is a normal end (an answer,
a finish tool, a limit); `RolloutFailure` is an infrastructure failure (policy or tool
unreachable). A malformed tool call is neither: it goes back to the policy as an error
message it can recover from, and is counted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nemo_gym.openai_utils import NeMoGymFunctionCallOutput, NeMoGymResponse
from nemo_gym.server_utils import ServerClient
from pydantic import BaseModel, ValidationError

from prorl_gym.config import StrictConfig
from prorl_gym.pipeline.peers import PeerUnreachable, error_detail, error_type, exchange
from prorl_gym.pipeline.policy import PolicyGate
from prorl_gym.wire.failures import NO_ENDPOINT_ERROR, FailureType, RolloutFailure, Stage
from prorl_gym.wire.items import TOKEN_FIELDS, parse_response, without_token_ids

# Tool route answers that mean the session's sandbox is gone: 409 unknown session (its server
# restarted, or the sandbox expired), 503 the sandbox itself failed.
LOST_SANDBOX = (409, 503)
# The model server's answer when the policy endpoint cannot serve a call at all (a route it lacks,
# no per-token log-probs while token ids are on): permanent, so never retried.
INCOMPATIBLE = 501
# The model server's answers when the endpoint refused the request itself (the model server's
# REFUSED_REQUEST): the same request is refused again.
REFUSED = (400, 413, 422)
# The model server's answer when the rollout's endpoint died (or none is left): the infrastructure's.
ENDPOINT_DIED = 503


# What a turn's output item carries for training (vllm_model's *ForTraining items), on its last item.


def _dumped(item) -> dict:
    return item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else dict(item)


class LoopLimits(StrictConfig):
    max_turns: int = 20  # policy calls
    max_output_tokens: int | None = None  # summed over all turns
    max_run_time_s: float | None = None  # checked between steps; the rollout ends gracefully
    policy_call_timeout_s: float = 600.0
    tool_call_timeout_s: float = 600.0


class Finished(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class LoopStats:
    turns: int = 0
    tool_calls: int = 0
    malformed_tool_calls: int = 0
    repeated_tool_calls: int = 0  # calls identical (name and arguments) to an earlier call of the rollout
    # How the model server read each tool call (tagged, constrained, lenient_*), in order; a server that
    # does not say leaves it empty.
    tool_call_paths: list[str] = field(default_factory=list)
    output_tokens: int = 0
    policy_s: float = 0.0
    tools_s: float = 0.0  # tool calls as the agent waits for them (HTTP included)
    tool_exec_s: float = 0.0  # of which inside the sandbox, as the tools report it
    # How each turn's prompt ids were made, as the model server says (rendered, extended, drifted,
    # rerendered: ...); a turn of a server that does not say is not counted.
    token_prompts: dict[str, int] = field(default_factory=dict)
    policy_versions: list[int] = field(default_factory=list)  # of each turn's generation (pipeline/policy.py)


@dataclass
class AgentLoop:
    client: ServerClient
    model_server: str
    resources_server: str
    params: BaseModel  # NeMoGymResponseCreateParamsNonStreaming, tools included
    limits: LoopLimits
    resources_cookies: dict[str, str]
    finish_tools: frozenset[str] = frozenset()
    outputs: list = field(default_factory=list)
    stats: LoopStats = field(default_factory=LoopStats)
    last_response: NeMoGymResponse | None = None
    model_cookies: dict[str, str] = field(default_factory=dict)
    on_turn: Callable[[int], Awaitable[None]] | None = None  # after each turn the rollout goes on from
    policy_failing: Callable[[], Awaitable[bool]] | None = None  # whether no policy endpoint is healthy now
    gate: PolicyGate | None = None  # the policy's version and pause (the trainer's weight updates)
    _params_body: dict | None = field(default=None, init=False, repr=False)  # policy_body's caches
    _wire: list[tuple[object, dict]] = field(default_factory=list, init=False, repr=False)
    _calls_seen: set[tuple[str, str]] = field(default_factory=set, init=False, repr=False)

    @property
    def tool_names(self) -> set[str]:
        return {tool["name"] if isinstance(tool, dict) else tool.name for tool in self.params.tools or []}

    async def run(self) -> str:
        """Step until finished; returns the stop reason."""
        deadline = time.monotonic() + self.limits.max_run_time_s if self.limits.max_run_time_s else None
        while True:
            try:
                if deadline and time.monotonic() > deadline:
                    raise Finished("max_run_time")
                await self.step()
            except Finished as done:
                return done.reason

    async def step(self) -> None:
        response = await self.query()
        self.outputs.extend(response.output)
        if response.incomplete_details:  # generation cut by max_output_tokens, or the context was full
            raise Finished((response.metadata or {}).get("prorl_stop") or "max_output_tokens")
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            raise Finished("answered")
        for call in calls:
            self.outputs.append(await self.execute(call))
        if self.finish_tools & {call.name for call in calls}:
            raise Finished("finish_tool")
        if self.stats.turns >= self.limits.max_turns:
            raise Finished("max_turns")
        if self.limits.max_output_tokens and self.stats.output_tokens >= self.limits.max_output_tokens:
            raise Finished("max_output_tokens")
        if self.on_turn is not None:
            await self.on_turn(self.stats.turns)

    def policy_body(self) -> dict:
        """This turn's request: the task's params and every item so far, each dumped once per rollout
        (not once per turn), token ids only on the last item that carries them. Every reader of a
        request's ids reads the last turn's alone (tito's prompt, NeMo RL's vLLM prefix repair, the
        chat drift check), and older turns' ids made each request grow with the square of the turns;
        the record keeps them all (self.outputs)."""
        if self._params_body is None:
            self._params_body = self.params.model_dump(exclude_unset=True)
            given = self.params.input or []
            given = [{"role": "user", "content": given}] if isinstance(given, str) else given  # as NeMo Gym reads it
            self._params_body["input"] = [_dumped(item) for item in given]
        cache = self._wire
        for i, item in enumerate(self.outputs):  # items replaced since (a branch's) are dumped anew
            if i >= len(cache) or cache[i][0] is not item:
                del cache[i:]
                cache.append((item, _dumped(item)))
        del cache[len(self.outputs) :]
        last = max((i for i, (_, wire) in enumerate(cache) if TOKEN_FIELDS & wire.keys()), default=-1)
        items = [wire if i == last else without_token_ids(wire) for i, (_, wire) in enumerate(cache)]
        body = dict(self._params_body, input=self._params_body["input"] + items)
        if self.limits.max_output_tokens:
            remaining = self.limits.max_output_tokens - self.stats.output_tokens
            body["max_output_tokens"] = min(remaining, self.params.max_output_tokens or remaining)
        return body

    async def query(self) -> NeMoGymResponse:
        body = self.policy_body()
        # An endpoint (or the model server) that died under the rollout is the infrastructure's
        # failure whatever was generated: the rollout runs again from a fresh INIT, never stitched
        # from its partial trajectory. A slow or failing answer is only before any output.
        infra = not self.outputs
        started = time.perf_counter()
        send = lambda: self._post(  # noqa: E731
            self.model_server,
            "/v1/responses",
            body,
            self.model_cookies,
            self.limits.policy_call_timeout_s,
            FailureType.POLICY_ERROR,
            "the policy",
            infra,
            unreachable_infra=True,
            refusable=not self.outputs,
        )
        try:  # held while the trainer has generation paused: outside the call's timeout
            (status, payload, cookies), version = await self.gate.call(send) if self.gate else (await send(), None)
        except RolloutFailure as exc:
            # No answer in time after partial output: the task's, unless the endpoint failed meanwhile (killed
            # mid-call, it may be declared dead only after this timeout: the busy soak's one "task" failure).
            if exc.failure.infra or self.policy_failing is None or not await self.policy_failing():
                raise
            message = f"{exc.failure.message}; its endpoint failed meanwhile (the model server's health checks)"
            raise RolloutFailure(Stage.RUN, FailureType.POLICY_ERROR, message, infra=True) from exc
        self.stats.policy_s += time.perf_counter() - started
        self.stats.turns += 1
        if version is not None:
            self.stats.policy_versions.append(version)
        if status == INCOMPATIBLE:  # the endpoint cannot serve this call: asking again costs, and changes nothing
            message = f"the policy endpoint cannot serve this call: {str(error_detail(payload))[:1000]}"
            raise RolloutFailure(Stage.RUN, FailureType.POLICY_INCOMPATIBLE, message, infra=False)
        if status != 200:
            message = f"model server returned {status}: {payload[:1000]!r}"
            # A request the endpoint refused (400, 413, 422) is refused again: not worth another attempt.
            infra = status == ENDPOINT_DIED or (infra and status not in REFUSED)
            # No endpoint could take the rollout's first call: nothing ran, so it costs no attempt.
            refused = not self.outputs and status == ENDPOINT_DIED and error_type(payload) == NO_ENDPOINT_ERROR
            raise RolloutFailure(Stage.RUN, FailureType.POLICY_ERROR, message, infra, refused=refused)
        self.model_cookies |= cookies
        try:
            response = parse_response(payload)
        except ValidationError as exc:
            message = f"invalid response from the policy: {exc}"
            raise RolloutFailure(Stage.RUN, FailureType.POLICY_ERROR, message, infra) from exc
        if response.usage:
            self.stats.output_tokens += response.usage.output_tokens
        if kind := (response.metadata or {}).get("prorl_prompt"):
            kind = kind.split(":", 1)[0]
            self.stats.token_prompts[kind] = self.stats.token_prompts.get(kind, 0) + 1
        if paths := (response.metadata or {}).get("prorl_tool_calls"):
            self.stats.tool_call_paths += paths.split(",")
        self.last_response = response
        return response

    async def execute(self, call) -> NeMoGymFunctionCallOutput:
        self.stats.tool_calls += 1
        if (call.name, call.arguments) in self._calls_seen:  # a model going round in circles: counted, run as asked
            self.stats.repeated_tool_calls += 1
        self._calls_seen.add((call.name, call.arguments))
        if call.name not in self.tool_names:
            return self._tool_error(call, f"unknown tool {call.name!r}; available tools: {sorted(self.tool_names)}")
        try:
            arguments = json.loads(call.arguments)
        except (json.JSONDecodeError, TypeError) as exc:
            return self._tool_error(call, f"the arguments are not valid JSON: {exc}")
        if not isinstance(arguments, dict):
            return self._tool_error(call, "the arguments must be a JSON object")
        started = time.perf_counter()
        status, payload, cookies = await self._post(
            self.resources_server,
            f"/{call.name}",
            arguments,
            self.resources_cookies,
            self.limits.tool_call_timeout_s,
            FailureType.TOOL_ERROR,
            f"tool {call.name!r}",
            True,
        )
        self.stats.tools_s += time.perf_counter() - started
        self.resources_cookies |= cookies
        if status == 422:  # the arguments did not match the tool's schema
            detail = json.dumps(error_detail(payload))[:1000]
            return self._tool_error(call, f"invalid arguments for {call.name!r}: {detail}")
        if status in LOST_SANDBOX:  # its server restarted, or the sandbox died: the rollout cannot go on
            message = f"tool {call.name!r}: the sandbox is lost ({status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.SANDBOX_LOST, message, infra=True)
        if status == 404:  # the server has no such route: asking again changes nothing
            message = f"the resources server has no route for tool {call.name!r} (404): {payload[:500]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.TOOL_ERROR, message, infra=False)
        if status != 200:
            message = f"tool {call.name!r} failed ({status}): {payload[:1000]!r}"
            raise RolloutFailure(Stage.RUN, FailureType.TOOL_ERROR, message, infra=True)
        result = json.loads(payload)
        if not isinstance(result, dict) or "content" not in result:  # another server's tool (NeMo Gym's own):
            output = payload.decode(errors="replace")  # its whole answer, as NeMo Gym's simple_agent passes it on
            return NeMoGymFunctionCallOutput(type="function_call_output", call_id=call.call_id, output=output)
        self.stats.tool_exec_s += float((result.get("metadata") or {}).get("duration_s") or 0.0)
        return NeMoGymFunctionCallOutput(type="function_call_output", call_id=call.call_id, output=result["content"])

    def _tool_error(self, call, message: str) -> NeMoGymFunctionCallOutput:
        self.stats.malformed_tool_calls += 1
        return NeMoGymFunctionCallOutput(type="function_call_output", call_id=call.call_id, output=f"Error: {message}")

    async def _post(
        self,
        server: str,
        path: str,
        body,
        cookies: dict,
        timeout: float,
        failure: FailureType,
        what: str,
        infra: bool,
        unreachable_infra: bool = False,
        refusable: bool = False,
    ):
        """POST and read the reply within `timeout`; unreachable or silent peers become `failure`
        (infrastructure's if `infra`; an unreachable peer also if `unreachable_infra`; a peer that
        refused the connection, so nothing was sent, is a refusal if `refusable`)."""
        try:
            answer = await exchange(self.client, "post", server, path, body, cookies, timeout)
        except TimeoutError:
            raise RolloutFailure(Stage.RUN, failure, f"{what} did not answer within {timeout:g}s", infra) from None
        except PeerUnreachable as exc:
            message = f"{what} is unreachable: {exc.reason}"
            refused = refusable and exc.refused
            raise RolloutFailure(Stage.RUN, failure, message, infra or unreachable_infra, refused=refused) from exc
        return answer.status, answer.payload, answer.cookies
