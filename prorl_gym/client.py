# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A typed client of the agent's job API (docs/job_api.md); its requests and answers are in
prorl_gym/wire/jobs.py.

    async with ProRLClient(await agent_url("http://127.0.0.1:11000", "math_agent")) as client:
        batch = await client.submit(rows, sampling={"temperature": 1.0}, samples_per_row=8, stop_after=48)
        async for record in client.stream(batch.batch_id):
            ...  # one RolloutRecord as it finishes: record.reward, record.failure, record.response, ...

A record is a RolloutRecord (prorl_gym/wire/records.py), the same model /run returns:
the row's own fields and the environment's verify fields (extra fields), `response` (the
whole transcript, token ids included; null when cancelled), `reward`, `failure` ({stage,
type, message} or null: drop such rows from training, never score them 0; `stage` is null
for a cancelled job), `stop_reason`, `timings`, counts, `token_ids_contiguous`, `host`,
`attempts`; in a stream also `job_id`, `batch_id` and `status` (completed | failed |
cancelled). A stream also tells when the policy is declared down (no endpoint healthy for the
agent's grace period) and up again: `stream(..., on_event=...)` is handed those events
(PolicyHealthView, `event` policy_down | policy_up). The server imports these models, so client and
server cannot drift apart.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel
from yarl import URL

from prorl_gym.errors import ProrlError
from prorl_gym.wire.jobs import (
    STREAM_EVENT_PREFIX,
    Batch,
    BatchProgress,
    CancelResult,
    ForkFrom,
    Job,
    PolicyHealthView,
    PolicyState,
    Sampling,
    Status,
    Stragglers,
    SubmitRequest,
)
from prorl_gym.wire.records import RolloutRecord

# ---------------------------------------------------------------------- the client


class JobAPIError(ProrlError):
    """A request the server refused (4xx/5xx), with its reason."""

    def __init__(self, status: int, detail: str, body: Any = None):
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.body = status, detail, body

    @property
    def retryable(self) -> bool:  # the service is full or not running yet: try again later
        return self.status in (429, 503)


class PolicyDown(ProrlError):
    """The agent declared its policy down (no endpoint healthy for its grace period): raise it from a
    stream's `on_event` to stop waiting on that batch (`policy_down_raises` does)."""

    def __init__(self, event: PolicyHealthView):
        super().__init__(event.message)
        self.event = event


def policy_down_raises(event: PolicyHealthView) -> None:
    """An `on_event` for ProRLClient.stream that ends the stream with PolicyDown when the policy goes down."""
    if event.event == "policy_down":
        raise PolicyDown(event)


async def agent_url(head_url: str, agent: str) -> str:
    """The base URL of the agent server named `agent` (e.g. math_agent), from NeMo Gym's head server."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
        http.get(f"{head_url.rstrip('/')}/server_instances") as response,
    ):
        response.raise_for_status()
        servers = await response.json()
    for server in servers:
        if agent in (server.get("process_name"), server.get("config_path")) and server.get("url"):
            return server["url"]
    raise LookupError(f"no server {agent!r} at {head_url}; it has {[s.get('process_name') for s in servers]}")


class ProRLClient:
    """Async client of one agent server; use as `async with ProRLClient(url) as client:`."""

    def __init__(self, base_url: str, *, timeout_s: float = 120.0, stream_idle_timeout_s: float = 120.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        # Streams last as long as their batch; the server's heartbeats keep them from going idle.
        self.stream_timeout = aiohttp.ClientTimeout(total=None, sock_read=stream_idle_timeout_s)
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ProRLClient:
        self._http = aiohttp.ClientSession(timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def submit(
        self,
        rows: list[dict],
        *,
        sampling: Sampling | dict | None = None,
        samples_per_row: int = 1,
        job_ids: list[str] | None = None,
        batch_id: str | None = None,
        environment: str | None = None,
        stop_after: int | None = None,
        snapshots: Literal["none", "every_turn"] | None = None,
        deadline_s: float | None = None,
        min_group_size: int | None = None,
        max_staleness: int | None = None,
        on_stale: Literal["rerun", "flag"] = "rerun",
        target_groups: int | None = None,
        stragglers: Stragglers | dict | None = None,
    ) -> Batch:
        """Hand over a batch; returns at once with the job ids. Idempotent for given batch or job ids."""
        request = SubmitRequest(
            rows=rows,
            snapshots=snapshots,
            sampling=Sampling.model_validate(sampling or {}),
            samples_per_row=samples_per_row,
            job_ids=job_ids,
            batch_id=batch_id,
            environment=environment,
            stop_after=stop_after,
            deadline_s=deadline_s,
            min_group_size=min_group_size,
            max_staleness=max_staleness,
            on_stale=on_stale,
            target_groups=target_groups,
            stragglers=Stragglers.model_validate(stragglers) if stragglers is not None else None,
        )
        return await self._call("POST", "/jobs", Batch, request.model_dump(exclude_none=True))

    async def branch(
        self, job_id: str, turn: int, *, samples: int = 1, batch_id: str | None = None, snapshots: str | None = None
    ) -> Batch:
        """`samples` new jobs that go on from turn `turn` of a finished job (one run with snapshots)."""
        request = SubmitRequest(
            rows=[],
            fork_from=ForkFrom(job_id=job_id, turn=turn),
            samples_per_row=samples,
            batch_id=batch_id,
            snapshots=snapshots,
        )
        return await self._call("POST", "/jobs", Batch, request.model_dump(exclude_none=True))

    async def stream(
        self,
        batch_id: str,
        *,
        after: int = 0,
        reconnect_s: float = 120.0,
        on_event: Callable[[PolicyHealthView], None] | None = None,
    ) -> AsyncIterator[RolloutRecord]:
        """The batch's records as they finish (completion order), until all have. A dropped stream (the
        agent restarting, a network blip) is resumed where it stopped, for up to `reconnect_s` without
        progress: offsets survive an agent restart, so nothing is skipped or seen twice. `on_event` is
        called with each event of the stream (the policy declared down or up again); an exception it
        raises ends the stream."""
        seen, retry_until, delay = after, None, 0.25
        path = f"/batches/{quote(batch_id, safe='')}/results"
        while True:
            try:
                async for record in self._lines(path, seen, on_event):
                    seen += 1
                    retry_until, delay = None, 0.25
                    yield record
                if (await self.progress(batch_id)).done:
                    return
                # the stream ended before the batch: the agent is shutting down; resume after its restart
            except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                pass
            except JobAPIError as exc:
                if not exc.retryable:
                    raise
            retry_until = retry_until or time.monotonic() + reconnect_s
            if time.monotonic() > retry_until:
                raise JobAPIError(503, f"the stream of batch {batch_id} could not be resumed within {reconnect_s}s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _lines(
        self, path: str, after: int, on_event: Callable[[PolicyHealthView], None] | None
    ) -> AsyncIterator[RolloutRecord]:
        async with self._session.get(
            self._url(path), params={"after": after}, timeout=self.stream_timeout
        ) as response:
            await _raise_for(response)
            buffer = bytearray()
            async for chunk in response.content.iter_any():  # records can exceed readline()'s line limit
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
                    if line.startswith(STREAM_EVENT_PREFIX):  # not a record: the policy declared down or up
                        if on_event is not None:
                            on_event(PolicyHealthView.model_validate_json(line))
                    elif line.strip():  # an empty line is a heartbeat
                        yield RolloutRecord.model_validate_json(line)

    async def results(
        self, batch_id: str, on_event: Callable[[PolicyHealthView], None] | None = None
    ) -> list[RolloutRecord]:
        """Every record of the batch, once all are in (`on_event`: as for stream())."""
        return [record async for record in self.stream(batch_id, on_event=on_event)]

    async def poll(self, job_id: str) -> Job:
        return await self._call("GET", f"/jobs/{quote(job_id, safe='/')}", Job)

    async def progress(self, batch_id: str) -> BatchProgress:
        return await self._call("GET", f"/batches/{quote(batch_id, safe='')}", BatchProgress)

    async def cancel_job(self, job_id: str) -> CancelResult:
        return await self._call("POST", f"/jobs/{quote(job_id, safe='/')}/cancel", CancelResult)

    async def cancel_batch(self, batch_id: str) -> CancelResult:
        return await self._call("POST", f"/batches/{quote(batch_id, safe='')}/cancel", CancelResult)

    async def stop_after(self, batch_id: str, k: int) -> CancelResult:
        """Cancel the rest of the batch once k usable results exist (at once if they already do)."""
        return await self._call("POST", f"/batches/{quote(batch_id, safe='')}/stop_after", CancelResult, {"k": k})

    async def acknowledge(self, batch_id: str) -> BatchProgress:
        """Done with a finished batch: the agent forgets it now, and releases its rollouts' snapshots."""
        return await self._call("POST", f"/batches/{quote(batch_id, safe='')}/ack", BatchProgress)

    async def status(self) -> Status:
        return await self._call("GET", "/status", Status)

    # The trainer's weight updates (docs/job_api.md, "Weight updates").

    async def policy(self) -> PolicyState:
        return await self._call("GET", "/policy", PolicyState)

    async def set_policy_version(self, version: int) -> PolicyState:
        return await self._call("POST", "/policy/version", PolicyState, {"version": version})

    async def pause(self, abort_in_flight: bool = False) -> PolicyState:
        """Hold every new policy call (and abort those in flight, to be sent again after resume)."""
        return await self._call("POST", "/policy/pause", PolicyState, {"abort_in_flight": abort_in_flight})

    async def resume(self, version: int | None = None) -> PolicyState:
        return await self._call("POST", "/policy/resume", PolicyState, {"version": version})

    @property
    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            raise RuntimeError("use the client as `async with ProRLClient(url) as client:`")
        return self._http

    def _url(self, path: str) -> URL:
        return URL(self.base_url + path, encoded=True)  # the path is quoted already

    async def _call[M: BaseModel](self, method: str, path: str, model: type[M], body: Any = None) -> M:
        async with self._session.request(method, self._url(path), json=body) as response:
            await _raise_for(response)
            return model.model_validate_json(await response.read())


async def _raise_for(response: aiohttp.ClientResponse) -> None:
    if response.status < 400:
        return
    raw = await response.read()
    try:
        body = json.loads(raw)
        detail = body.get("detail", body) if isinstance(body, dict) else body
    except ValueError:
        body = detail = raw.decode(errors="replace")[:2000]
    raise JobAPIError(response.status, detail if isinstance(detail, str) else json.dumps(detail)[:2000], body)
