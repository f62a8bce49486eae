# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's vllm_model over several policy endpoints: least-in-flight, sticky, health-checked.

Everything vllm_model does (Responses <-> Chat Completions, token ids via /tokenize) is
inherited; what changes is which endpoint serves a request and how long it may take:

- a new session (one rollout) goes to the healthy endpoint with the fewest requests in
  flight (ties: fewest sessions) and stays there for its whole rollout (prefix cache);
- an endpoint declared dead (health checks or connection errors) has its in-flight requests
  cancelled and answered 503 at once; its sessions' next requests are answered 503 too
  (they are not moved: see balancer.py); new sessions go elsewhere;
- every policy call is bounded by request_timeout_s (504);
- a call whose caller goes away (the agent cancelled the rollout: a straggler replaced or evicted, a
  job cancelled, calls aborted for a weight update) is cancelled, which closes its request to the
  endpoint: vLLM and SGLang abort the generation (prorl_gym/disconnect.py);
- GET/POST/DELETE /endpoints list, add and remove endpoints at run time.

Run it with one uvicorn worker (the default): routing state lives in the process.
"""

from prorl_gym.supervise import supervise_early

supervise_early(__name__)  # run by ng_run: become the small supervisor before the server's imports

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from aiohttp.client_exceptions import ClientResponseError
from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from nemo_gym.base_responses_api_model import Body
from nemo_gym.openai_utils import (
    NeMoGymAsyncOpenAI,
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymChatCompletionMessage,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.server_utils import SESSION_ID_KEY, is_nemo_gym_fastapi_entrypoint
from nemo_gym.telemetry.endpoints import traced_endpoint
from nemo_gym.telemetry.span_groups import GymSpanGroup
from pydantic import BaseModel, PrivateAttr, ValidationError, model_validator
from pydantic_core import from_json
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prorl_gym.asgi import PlainASGIMiddleware, without_joining_ray
from prorl_gym.config import StrictServerConfig
from prorl_gym.disconnect import CancelOnDisconnect
from prorl_gym.lifespan import run_with_app
from prorl_gym.prometheus import ServerMetrics
from prorl_gym.supervise import supervised
from prorl_gym.wire.items import parse_create_params
from responses_api_models.balanced_vllm_model.balancer import Unavailable, normalize_url
from responses_api_models.balanced_vllm_model.client import TokenIdsUnavailable
from responses_api_models.balanced_vllm_model.llamacpp import CONTEXT_ERROR, UnsupportedSampling
from responses_api_models.balanced_vllm_model.pool import BalancerSettings, EndpointFile, EndpointPool, Lease
from responses_api_models.balanced_vllm_model.tito import TokenInTokenOut, TokenModeSettings
from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

T = TypeVar("T")
ENDPOINT_HEADER = "x-policy-endpoint"  # which endpoint served a response (logs, tests)
POLICY_ROUTES = ("/v1/responses", "/v1/chat/completions")  # a caller that goes away cancels the call
MISSING_ROUTE = (404, 405, 501)  # the endpoint lacks the route: asking again would not help
REFUSED_REQUEST = (400, 413, 422)  # the endpoint refused what was asked: the same request gets the same answer
NO_TOKEN_IDS = (
    "Token ids need an endpoint that returns them (vLLM, SGLang); to evaluate an endpoint without them, turn "
    "them off: return_token_id_information: false (python -m prorl_gym.evaluation --no-token-ids, "
    "make eval TOKEN_IDS=0)"
)
# The client of the endpoint serving the current call; set inside the call's own task.
_CLIENT: ContextVar[NeMoGymAsyncOpenAI] = ContextVar("policy_endpoint_client")


class BalancedVLLMModelConfig(StrictServerConfig, TokenModeSettings, BalancerSettings, VLLMModelConfig):
    """vllm_model's config; base_url is the endpoint list: a list, or one string (commas separate URLs);
    token_mode chat (vllm_model's chat route) or tito (token-in/token-out: tito.py)."""

    @model_validator(mode="after")
    def _endpoints(self) -> "BalancedVLLMModelConfig":
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url)
        split = [normalize_url(u) for url in urls for u in url.split(",") if u.strip()]
        self.base_url = list(dict.fromkeys(split))  # ordered, without duplicates
        if self.num_workers not in (None, 1):
            raise ValueError("balanced_vllm_model keeps routing state in one process: num_workers must be 1")
        if self.token_mode == "tito" and not self.return_token_id_information:
            raise ValueError("token_mode: tito returns token ids: it needs return_token_id_information: true")
        return self


class EndpointRequest(BaseModel):
    url: str
    # DELETE only: cancel its in-flight requests (503) instead of letting them finish.
    cancel_in_flight: bool = False


class BalancedVLLMModel(PlainASGIMiddleware, VLLMModel):
    config: BalancedVLLMModelConfig
    _pool: EndpointPool = PrivateAttr()
    _metrics: ServerMetrics = PrivateAttr()
    _call_seconds: Any = PrivateAttr()
    _prompts: Any = PrivateAttr()
    _aborted: Any = PrivateAttr()
    _tool_calls: Any = PrivateAttr()
    _tito: TokenInTokenOut | None = PrivateAttr(None)

    def _post_init(self) -> None:
        super()._post_init()  # vllm_model's state (transport log, external capture staging, ...); its clients unused
        c = self.config
        self._pool = EndpointPool(c, c.api_key, c.default_headers, list(c.base_url))
        self._metrics = ServerMetrics()
        doc = "Policy calls by endpoint and outcome (ok, or the HTTP status)"
        self._call_seconds = self._metrics.histogram("prorl_policy_call_seconds", doc, ("endpoint", "outcome"))
        healthy = self._metrics.gauge("prorl_policy_endpoints_healthy", "Policy endpoints that take new sessions")
        healthy.set_function(lambda: sum(e.healthy for e in self._pool.balancer.endpoints))
        doc = "Policy calls by token mode and how their prompt ids relate to the turn before (tito.py)"
        self._prompts = self._metrics.counter("prorl_token_prompts_total", doc, ("mode", "kind"))
        doc = "Policy calls whose caller went away before the answer: cancelled, their endpoint request closed"
        self._aborted = self._metrics.counter("prorl_policy_calls_aborted_total", doc, ("route",))
        doc = "Tool calls read from token-in/token-out generations, by path (tagged, constrained, lenient_*: tito.py)"
        self._tool_calls = self._metrics.counter("prorl_tool_calls_total", doc, ("path",))
        self._tito = TokenInTokenOut(c, c.model, c.uses_reasoning_parser) if c.token_mode == "tito" else None

    @classmethod
    def run_webserver(cls):
        """As NeMo Gym's, under a supervisor that starts the server again if it dies (prorl_gym/supervise.py)."""
        return supervised(without_joining_ray(super().run_webserver))

    @property
    def pool(self) -> EndpointPool:
        return self._pool

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # NeMo Gym routed /v1/responses to responses_dispatch (its body validated by its item union): ours reads
        # it itself, traced as NeMo Gym traces its own
        app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) != "/v1/responses"]
        attributes = {"nemo.gym.server.name": self.config.name}
        route = traced_endpoint(GymSpanGroup.MODEL_CALL, "gym.model.responses", self._responses_route, attributes)
        app.post("/v1/responses")(route)
        app.get("/endpoints")(self.list_endpoints)
        app.post("/endpoints")(self.add_endpoint)
        app.delete("/endpoints")(self.remove_endpoint)

        app.add_middleware(EndpointHeader)
        app.add_middleware(CancelOnDisconnect, paths=POLICY_ROUTES, on_abort=lambda r: self._aborted.labels(r).inc())
        self._metrics.mount(app)

        run_with_app(app, self._pool.start, self._pool.close)  # health checks run from here until shutdown
        if self.config.endpoint_file:  # vllm_model's option: the pool follows the URL the file publishes
            follower = EndpointFile(self._pool, self.config.endpoint_file, self.config.endpoint_check_interval_s)
            run_with_app(app, follower.start, follower.close)
        return app

    # ------------------------------------------------------------------ policy calls
    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming = Body()
    ) -> NeMoGymResponse:
        """vllm_model's responses(), with the answer's items kept as the converter made them instead of
        dumped and validated again. Its route reads the body itself (`_responses_route`); NeMo Gym's
        /v1/messages calls it with a body."""
        if self.config.is_responses_native:
            response = await self._responses_native(request, body)
        else:
            response = await self._responses_via_chat(request, body)
        said = {  # how its prompt ids were made; how each tool call was read; calls cut and not run; an early end
            "prorl_prompt": getattr(request.state, "prorl_prompt", None),
            "prorl_tool_calls": ",".join(getattr(request.state, "prorl_tool_calls", None) or []) or None,
            "prorl_cut": getattr(request.state, "prorl_cut", None),
            "prorl_stop": getattr(request.state, "prorl_stop", None),
        }
        if said := {k: v for k, v in said.items() if v}:
            response.metadata = (response.metadata or {}) | said
        return response

    async def _responses_route(self, request: Request) -> Response:
        """/v1/responses as NeMo Gym's own (responses_dispatch): through its token capture (_invoke_responses:
        the rollout's parent resolved, the call's ids recorded; _finalize_served_response), a streamed request
        answered as its Responses events; the request's items validated by their type (prorl_gym/wire/items.py)
        instead of through NeMo Gym's item union (its route's validation): the same params, the same 422s,
        ~2x cheaper."""
        data = await _request_json(request)
        if isinstance(data, dict) and data.get("stream"):  # its streaming dialect (Codex CLI): NeMo Gym's path
            return await self.responses_dispatch(request, data)
        response = await self._invoke_responses(request, _create_params(data))
        answer = Response(response.model_dump_json(by_alias=True), media_type="application/json")  # in one pass
        await self._finalize_served_response(response)
        return answer

    async def _responses_via_chat(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """As VLLMModel.responses: Responses params -> Chat Completions -> a Response (tests/.../test_app.py
        compares the two), its items kept as the converter made them: the converter dumps them and the
        Response validates them again (~1 ms for an item with a few thousand ids)."""
        chat_params = self._converter.responses_to_chat_completion_create_params(body)
        body.model = self.config.model
        completion = await self.chat_completions(request, chat_params)
        choice = completion.choices[0]
        bare = completion.model_copy(
            update={"choices": [choice.model_copy(update={"message": NeMoGymChatCompletionMessage(role="assistant")})]}
        )
        response = self._converter.chat_completion_to_response(
            responses_create_params=body, chat_completion=bare, preserve_envelope_id=self._preserve_envelope_id()
        )
        response.output = self._converter.postprocess_chat_response(choice)
        return response

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming = Body()
    ) -> NeMoGymChatCompletion:
        if self._tito is not None:
            return await self._balanced(request, lambda: self._token_in_token_out(request, body))
        completion = await self._balanced(
            request, lambda: super(BalancedVLLMModel, self).chat_completions(request, body)
        )
        if self.config.return_token_id_information:
            kind = _chat_prompt_kind(body.messages, completion)
            self._prompts.labels("chat", kind).inc()
            request.state.prorl_prompt = kind
        return completion

    async def _token_in_token_out(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        body_dict = self._preprocess_chat_completion_create_params(request, body.model_dump(exclude_unset=True))
        client = self._resolve_client(request)
        prompt = await self._tito.prompt(client, body_dict)
        self._prompts.labels("tito", prompt.kind).inc()
        request.state.prorl_prompt = prompt.kind + (f": {prompt.reason}" if prompt.reason else "")
        try:
            completion = await self._tito.complete(client, body_dict, prompt)
        except ClientResponseError as e:  # out of context: an empty turn that ended on length, as vllm_model does
            text = e.response_content.decode(errors="replace") if getattr(e, "response_content", None) else ""
            if e.status == 400 and ("context length" in text or "max_tokens" in text or CONTEXT_ERROR in text):
                request.state.prorl_stop = "context_length"  # the agent ends the rollout so, not as a token limit
                empty = self._create_empty_chat_completion()
                empty.choices[0].finish_reason = "length"
                return empty
            raise
        if cut := completion.pop("prorl_cut", None):
            request.state.prorl_cut = cut
        request.state.prorl_tool_calls = paths = completion.pop("prorl_tool_calls")
        for path in paths:
            self._tool_calls.labels(path).inc()
        return NeMoGymChatCompletion.model_validate(completion)

    async def _responses_native(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        return await self._balanced(request, lambda: super(BalancedVLLMModel, self)._responses_native(request, body))

    def _resolve_client(self, request: Request) -> NeMoGymAsyncOpenAI:
        client = _CLIENT.get(None)
        if client is None:
            raise RuntimeError("policy calls must go through BalancedVLLMModel._balanced (no endpoint leased)")
        return client

    async def _balanced(self, request: Request, call: Callable[[], Awaitable[T]]) -> T:
        """Lease the session's endpoint and run one bounded policy call on it."""
        try:
            lease = self._pool.acquire(request.session[SESSION_ID_KEY])
        except Unavailable as e:
            raise HTTPException(status_code=e.status, detail=e.detail) from e
        request.state.policy_endpoint = lease.endpoint.url
        started, outcome = time.perf_counter(), "ok"
        try:
            return await self._pool.run(lease, lambda: _on_endpoint(lease, call))
        except Unavailable as e:
            outcome = str(e.status)
            raise HTTPException(status_code=e.status, detail=e.detail) from e
        except ClientResponseError as e:
            if e.status in MISSING_ROUTE:
                outcome = "incompatible"
                raise HTTPException(
                    501, f"{lease.endpoint.url} has no route for this call ({e.status}: {e.message})"
                ) from e
            if e.status in REFUSED_REQUEST:  # the request's content: the caller's to know, not a 500
                outcome = str(e.status)
                said = e.response_content.decode(errors="replace") if getattr(e, "response_content", None) else ""
                raise HTTPException(
                    e.status, f"{lease.endpoint.url} refused the request ({e.status}): {said[:2000] or e.message}"
                ) from e
            raise
        except TokenIdsUnavailable as e:
            outcome = "incompatible"
            raise HTTPException(501, f"{e}. {NO_TOKEN_IDS}") from e
        except UnsupportedSampling as e:  # the request's, as the endpoint's own refusals
            outcome = "422"
            raise HTTPException(422, str(e)) from e
        finally:
            self._call_seconds.labels(lease.endpoint.url, outcome).observe(time.perf_counter() - started)

    # ------------------------------------------------------------------ admin
    async def list_endpoints(self) -> dict[str, Any]:
        balancer = self._pool.balancer
        return {"endpoints": [e.view() for e in balancer.endpoints], "sessions": balancer.num_sessions}

    async def add_endpoint(self, body: EndpointRequest) -> dict[str, Any]:
        """Add an endpoint; it is checked once now and joins healthy only if that check passes."""
        try:
            url = normalize_url(body.url)
        except ValueError as e:
            raise HTTPException(status_code=422, detail=str(e)) from e
        if self._pool.balancer.get(url) is not None:
            raise HTTPException(status_code=409, detail=f"endpoint {url} is already in the pool")
        error = await self._pool.probe(url)
        if self._pool.balancer.get(url) is not None:  # added concurrently while probing
            raise HTTPException(status_code=409, detail=f"endpoint {url} is already in the pool")
        endpoint = self._pool.add(url, healthy=error is None)
        endpoint.last_error = error
        return endpoint.view()

    async def remove_endpoint(self, body: EndpointRequest) -> dict[str, Any]:
        """Remove an endpoint: no new sessions, its sessions fail fast; in-flight requests finish
        unless cancel_in_flight (then 503 at once)."""
        try:
            endpoint = self._pool.remove(body.url, body.cancel_in_flight)
        except (KeyError, ValueError) as e:
            raise HTTPException(status_code=404, detail=f"endpoint {body.url} is not in the pool") from e
        return endpoint.view() | {"removed": True}


class EndpointHeader:
    """Names the endpoint that served a call in a response header. Plain ASGI: a
    BaseHTTPMiddleware would cost about a millisecond per policy call."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = scope.setdefault("state", {})  # request.state writes here, also from inner scopes

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start" and (url := state.get("policy_endpoint")):
                message["headers"] = [*message.get("headers", []), (ENDPOINT_HEADER.encode(), url.encode())]
            await send(message)

        await self.app(scope, receive, send_with_header)


def _chat_prompt_kind(messages: list[dict], completion: NeMoGymChatCompletion) -> str:
    """chat mode: did the endpoint's prompt extend the ids of the turn before ("extended"), or not ("drifted")?"""
    prompt = getattr(completion.choices[0].message, "prompt_token_ids", None) if completion.choices else None
    before = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if prompt is None or before is None or not before.get("prompt_token_ids"):
        return "rendered"
    seen = [*before["prompt_token_ids"], *(before.get("generation_token_ids") or [])]
    if list(prompt[: len(seen)]) == seen:  # ids as ints on both sides (a validated request): no conversions
        return "extended"
    return "extended" if [int(i) for i in prompt[: len(seen)]] == [int(i) for i in seen] else "drifted"


async def _request_json(request: Request) -> Any:
    """The request's body, decoded (a 422 as FastAPI's Body() answers a body that is not JSON)."""
    raw = await request.body()
    try:
        return from_json(raw)
    except ValueError as e:
        error = {"type": "json_invalid", "loc": ("body",), "msg": f"JSON decode error: {e}", "input": {}}
        raise RequestValidationError([error], body=raw) from e


def _create_params(data: Any) -> NeMoGymResponseCreateParamsNonStreaming:
    """The request's params as FastAPI's Body() would give them (a 422 with the errors otherwise)."""
    try:
        return parse_create_params(data)
    except ValidationError as e:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in e.errors()], body=data
        ) from e


async def _on_endpoint[T](lease: Lease, call: Callable[[], Awaitable[T]]) -> T:
    _CLIENT.set(lease.endpoint.client)  # the call runs in its own task: this stays local to it
    return await call()


if __name__ == "__main__":
    BalancedVLLMModel.run_webserver()
elif is_nemo_gym_fastapi_entrypoint(__file__):
    app = BalancedVLLMModel.run_webserver()
