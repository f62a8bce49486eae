# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's OpenAI client for one endpoint, minus its unbounded retries.

NeMoGymAsyncOpenAI sends through `nemo_gym.server_utils.request`, which retries connection
errors forever (0.5 s apart) on a client without timeouts: a dead endpoint would hang every
request on it. This client keeps the rest (URLs, JSON, status checks that vllm_model's
context-length handling relies on) and sends through `Transport`, which bounds connection
retries and reports connection failures to the balancer.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import os
import time
from typing import Any, Protocol

from aiohttp import ClientResponse
from nemo_gym.openai_utils import MAX_NUM_TRIES, RETRY_ERROR_CODES, NeMoGymAsyncOpenAI, get_response_json
from pydantic import PrivateAttr

from prorl_gym.errors import ProrlError
from responses_api_models.vllm_model.app import _append_transport_io

# NeMo Gym's vllm_model logs every engine call it makes to this file when set (one JSON line per event); the
# calls it does not make itself (token-in/token-out's /v1/completions, SGLang's /generate) are logged here, alike.
TRANSPORT_LOG = "NEMO_GYM_VLLM_TRANSPORT_LOG"

log = logging.getLogger(__name__)
STATUS_RETRY_SLEEP_S = 0.5
# What NeMo Gym retries (429, 5xx and, since 0.7, 404 and 408), less 404: an endpoint without the route
# answers it again every time, and the model server tells the caller at once (501, incompatible endpoint).
RETRY_STATUSES = frozenset(RETRY_ERROR_CODES) - {404}


class TokenIdsUnavailable(ProrlError):
    """The endpoint answered without the per-token log-probs token ids are read from: it cannot give ids."""


class Transport(Protocol):
    async def __call__(self, method: str, url: str, json: Any, headers: dict[str, str]) -> ClientResponse: ...


class EndpointClient(NeMoGymAsyncOpenAI):
    _transport: Transport = PrivateAttr()

    @classmethod
    def create(
        cls, base_url: str, api_key: str, default_headers: dict[str, str], transport: Transport
    ) -> EndpointClient:
        client = cls(base_url=base_url, api_key=api_key, default_headers=default_headers)
        client._transport = transport
        return client

    async def create_chat_completion(self, **kwargs: Any) -> dict:
        """Asks for the prompt's token ids with the completion (vLLM >= 0.10.2 `return_token_ids`;
        older versions ignore the field) and puts them in the message, where vllm_model looks first:
        it then skips its per-turn /tokenize call, and the ids are those of the request itself."""
        if not kwargs.get("logprobs"):  # vllm_model asks for logprobs when it wants token ids
            return await super().create_chat_completion(**kwargs)
        completion = await super().create_chat_completion(**(kwargs | {"return_token_ids": True}))
        choices = completion.get("choices") or []
        if choices and (choices[0].get("logprobs") or {}).get("content") is None:
            raise TokenIdsUnavailable(f"{self.base_url} returned no per-token log-probs")
        hoist_token_ids(completion)
        return completion

    async def create_completion(self, **kwargs: Any) -> dict:
        """vLLM's /v1/completions (a token-id prompt: token-in/token-out)."""
        return await self._post(f"{self.base_url}/completions", kwargs)

    async def create_generate(self, **kwargs: Any) -> dict:
        """SGLang's native /generate (input_ids in, output ids out), at the server's root."""
        return await self._post(f"{self.base_url.removesuffix('/v1')}/generate", kwargs)

    async def create_at_root(self, path: str, body: dict) -> dict:
        """A route at the server's root (llama.cpp's /completion, /apply-template, /tokenize)."""
        return await self._post(f"{self.base_url.removesuffix('/v1')}{path}", body)

    async def _post(self, url: str, body: dict) -> dict:
        if not os.environ.get(TRANSPORT_LOG, "").strip():
            response = await self._request(method="POST", url=url, json=body)
            await self._raise_for_status(response, {"url": url, "json": body})
            return await get_response_json(response)
        return await self._logged_post(url, body)

    async def _logged_post(self, url: str, body: dict) -> dict:
        """_post, its request and what came back in NeMo Gym's transport log (schema 2, as vllm_model writes it)."""
        index, started = next(_CALLS), time.time_ns()
        event = {"schema_version": 2, "call_index": index, "pid": os.getpid(), "url": url}
        payload = json.dumps(body, sort_keys=True, separators=(",", ":"))
        await _log(
            event
            | {"event": "transport_request", "timestamp_unix_ns": started, "request_payload": body}
            | {"request_payload_sha256": hashlib.sha256(payload.encode()).hexdigest()}
        )
        try:
            response = await self._request(method="POST", url=url, json=body)
            await self._raise_for_status(response, {"url": url, "json": body})
            answer = await get_response_json(response)
        except Exception as exc:
            ended = time.time_ns()
            status, content = getattr(exc, "status", None), getattr(exc, "response_content", None)
            kind = "transport_error_response" if status is not None else "transport_error"
            details = {"http_status": status, "raw_response_body": content.decode(errors="replace")} if content else {}
            await _log(
                event
                | {"event": kind, "timestamp_unix_ns": ended, "elapsed_ns": ended - started}
                | details
                | {"error_type": type(exc).__name__, "error": repr(exc)}
            )
            raise
        ended = time.time_ns()
        await _log(
            event
            | {"event": "transport_response", "timestamp_unix_ns": ended, "elapsed_ns": ended - started}
            | {"raw_response": answer}
        )
        return answer

    async def _request(self, method: str, url: str, json: Any = None, **_: Any) -> ClientResponse:
        headers = self.default_headers | {"Authorization": f"Bearer {self.api_key}"}
        # Retryable statuses (429, 408, 5xx) are retried like vllm_model does, but at most
        # MAX_NUM_TRIES times: the last response goes back for the caller's status check.
        for attempt in range(1, MAX_NUM_TRIES + 1):
            response = await self._transport(method=method, url=url, json=json, headers=headers)
            if response.status not in RETRY_STATUSES or attempt == MAX_NUM_TRIES:
                return response
            body = (await response.read())[:200]
            log.warning("policy %s answered %s (try %d/%d): %r", url, response.status, attempt, MAX_NUM_TRIES, body)
            await asyncio.sleep(STATUS_RETRY_SLEEP_S)
        raise AssertionError("unreachable")


_CALLS = itertools.count(1)  # this process's engine calls logged (call_index)


async def _log(event: dict) -> None:
    await asyncio.to_thread(_append_transport_io, event)  # it appends and fsyncs: off the event loop


def hoist_token_ids(completion: dict) -> None:
    """prompt_token_ids (top level) and each choice's generation ids and log-probs into its message,
    as vllm_model's own extraction would put them (generation ids as it reads them from the
    `token_id:<id>` log-prob tokens). A choice without all of them is left for vllm_model."""
    prompt = completion.get("prompt_token_ids")
    choices = completion.get("choices") or []
    hoisted = 0
    for choice in choices:
        logprobs = (choice.get("logprobs") or {}).get("content")
        if prompt is None or logprobs is None or choice.get("token_ids") is None:
            continue
        choice["message"] |= {
            "prompt_token_ids": prompt,
            "generation_token_ids": [entry["token"].removeprefix("token_id:") for entry in logprobs],
            "generation_log_probs": [entry["logprob"] for entry in logprobs],
        }
        choice.pop("logprobs")
        choice.pop("token_ids")
        hoisted += 1
    if choices and hoisted == len(choices):  # nemo-gym 0.7 reads a top-level prompt without choice ids as partial
        completion.pop("prompt_token_ids")
