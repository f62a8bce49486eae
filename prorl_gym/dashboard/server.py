# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's routes, mounted on the agent server (GET /dashboard): a static page (static/, no
build step) that polls `/dashboard/api/live` once a second and asks the inspector's routes on demand.

    GET  /dashboard                       the page
    GET  /dashboard/api/live?since=T      stages, counters, time series after T, batches, policy
                                          endpoints, sandbox hosts, journal size
    GET  /dashboard/api/rollouts?...      search finished rollouts (batch, job, row, environment,
                                          failure, reward range), paginated
    GET  /dashboard/api/rollout?job_id=J  one rollout: the record (token ids as counts) and its turns
    POST /dashboard/api/actions/...       cancel a batch, drain a host: 403 unless `actions: true`,
                                          401 without the configured token

Cost is bounded whatever the number of viewers: the live answer (the job status's percentiles, the
model and resources servers' own status) is computed at most once per `cache_s`; the index holds
summaries only, capped; records are read from the journal one at a time, when opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from pydantic import Field

from prorl_gym.config import StrictConfig
from prorl_gym.dashboard.index import Query as Search
from prorl_gym.dashboard.index import RecentRuns, RolloutIndex, turns
from prorl_gym.dashboard.live import LiveCounters, Series
from prorl_gym.jobs.manager import JobManager
from prorl_gym.pipeline.peers import PeerUnreachable, exchange
from prorl_gym.wire.records import RolloutRecord

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
PEER_TIMEOUT_S = 2.0
# The balanced model server's histogram of policy calls (responses_api_models/balanced_vllm_model): sum and count
POLICY_CALLS = re.compile(r'^prorl_policy_call_seconds_(sum|count)\{endpoint="([^"]*)",outcome="ok"\} (\S+)$')
RECORD_FIELDS = set(RolloutRecord.model_fields) | {"_ng_failure_class", "responses_create_params"}


class DashboardConfig(StrictConfig):
    """The agent's `dashboard:` block."""

    enabled: bool = True
    # Buttons that change something (cancel a batch, drain a sandbox host): off unless set. With a
    # token, they need it (Authorization: Bearer <token>; the page asks for it once).
    actions: bool = False
    action_token: str | None = None
    max_indexed: int = Field(100_000, ge=1)  # rollout summaries held for search (~300 bytes each)
    # Records of POST /run (not journaled: ng_collect_rollouts, NeMo RL) kept, as they are, for the inspector;
    # each is as large as its transcript with token ids (tens of KB; more for long SWE rollouts)
    keep_runs: int = Field(500, ge=0)
    sample_s: float = Field(2.0, gt=0)  # time series resolution
    cache_s: float = Field(1.0, ge=0)  # the live answer is computed at most this often


class CancelBatch(StrictConfig):
    batch_id: str


class DrainHost(StrictConfig):
    host: str
    draining: bool = True


class Dashboard:
    def __init__(
        self,
        jobs: JobManager,
        config: DashboardConfig,
        *,
        environment: str,
        stages: Callable[[], dict],
        peers: Any = None,  # .get/.post(server_name, url_path, ...) (the agent's PeerClient)
        resources_server: str | None = None,
        model_server: str | None = None,
        spans_of: Callable[[str], list[dict]] | None = None,  # job id -> its trace's spans, if kept
    ):
        self.jobs, self.config, self.environment = jobs, config, environment
        self.peers, self.resources_server, self.model_server = peers, resources_server, model_server
        self.spans_of = spans_of
        self.counters = LiveCounters()
        self.series = Series(self.counters, stages, config.sample_s)
        self.runs = RecentRuns(config.keep_runs)
        self.index = RolloutIndex(jobs.batch_views, jobs.journal.fields, environment, config.max_indexed, self.runs)
        self._live: tuple[float, dict] | None = None
        self._policy_calls: dict[str, tuple[float, float]] = {}  # endpoint -> (seconds, calls) at the last look
        self._live_lock = asyncio.Lock()
        self._sampler: asyncio.Task | None = None

    # ------------------------------------------------------------------ lifecycle (run_with_app)

    async def start(self) -> None:
        self._sampler = asyncio.get_running_loop().create_task(self._sample(), name="dashboard sampler")

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()

    async def _sample(self) -> None:
        while True:
            self.series.sample()
            await asyncio.sleep(self.config.sample_s)

    # ------------------------------------------------------------------ routes

    def mount(self, app: FastAPI) -> None:
        page = (STATIC / "index.html").read_bytes()

        @app.get("/dashboard", include_in_schema=False)
        async def dashboard_page() -> HTMLResponse:
            return HTMLResponse(page)

        @app.get("/dashboard/static/{name}", include_in_schema=False)
        async def dashboard_static(name: str) -> FileResponse:
            if name not in STATIC_FILES:
                raise HTTPException(404, f"no dashboard file {name!r}")
            return FileResponse(STATIC / name, media_type=STATIC_FILES[name])

        @app.get("/dashboard/api/live")
        async def dashboard_live(since: float = 0.0) -> Response:
            live = await self.live()
            body = live | {"series": self.series.since(since)}
            return Response(orjson.dumps(body), media_type="application/json")

        @app.get("/dashboard/api/rollouts")
        async def dashboard_rollouts(
            batch: str | None = None,
            job: str | None = None,
            row: int | None = Query(None, ge=0),
            environment: str | None = None,
            failure: str | None = None,
            reward_min: float | None = None,
            reward_max: float | None = None,
            offset: int = Query(0, ge=0),
            limit: int = Query(50, ge=1, le=500),
        ) -> Response:
            query = Search(
                batch or None, job or None, row, environment or None, failure or None, reward_min, reward_max
            )
            return Response(orjson.dumps(await self.search(query, offset, limit)), media_type="application/json")

        @app.get("/dashboard/api/rollout")
        async def dashboard_rollout(job_id: str = Query(..., min_length=1)) -> Response:
            return Response(orjson.dumps(await self.rollout(job_id)), media_type="application/json")

        @app.post("/dashboard/api/actions/cancel_batch")
        async def dashboard_cancel_batch(request: Request, body: CancelBatch):
            self._allowed(request)
            return await self.jobs.cancel_batch(body.batch_id)

        @app.post("/dashboard/api/actions/drain_host")
        async def dashboard_drain_host(request: Request, body: DrainHost):
            self._allowed(request)
            if self.peers is None or self.resources_server is None:
                raise HTTPException(404, "this agent has no resources server to drain")
            try:
                answer = await exchange(self.peers, "post", self.resources_server, "/hosts/drain", body.model_dump())
            except PeerUnreachable as exc:
                raise HTTPException(502, str(exc)) from None
            return Response(answer.payload, status_code=answer.status, media_type="application/json")

    def _allowed(self, request: Request) -> None:
        if not self.config.actions:
            raise HTTPException(403, "dashboard actions are off (set the agent's dashboard.actions: true)")
        token = self.config.action_token
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if token and not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "a dashboard action needs the configured token (Authorization: Bearer ...)")

    # ------------------------------------------------------------------ answers

    async def live(self) -> dict:
        """Everything the live view shows but its time series; computed at most once per cache_s."""
        async with self._live_lock:
            now = time.monotonic()
            if self._live is not None and now - self._live[0] < self.config.cache_s:
                return self._live[1]
            status, endpoints, hosts = await asyncio.gather(
                self.jobs.status(), self._peer_status("model"), self._peer_status("resources")
            )
            batches = []
            for view in reversed(self.jobs.batch_views()[-20:]):  # the newest 20
                batches.append(
                    {
                        "batch_id": view.id,
                        "total": len(view.job_ids),
                        "finished": len(view.results),
                        "usable": view.usable,
                        "done": view.done,
                        "stop_after": view.stop_after,
                        "samples_per_row": view.group_size,
                        "stragglers": s.model_dump() if (s := self.jobs.stragglers.progress(view.id)) else None,
                    }
                )
            live = {
                "now": time.time(),
                "environment": self.environment,
                "status": status.model_dump(mode="json"),
                "counters": {
                    "finished": self.counters.finished,
                    "usable": self.counters.usable,
                    "retried": self.counters.retried,
                    "failed": dict(self.counters.failed),
                    "attempt_failures": dict(self.counters.attempt_failures),
                },
                "batches": batches,
                "stragglers": dataclasses.asdict(self.jobs.stragglers.totals),
                "endpoints": endpoints,
                "hosts": hosts,
                "indexed": len(self.index),
                "actions": self.config.actions,
                "traced": self.spans_of is not None,
                "sample_s": self.config.sample_s,
            }
            self._live = (now, live)
            return live

    async def _endpoint_latency(self) -> dict[str, dict[str, float]]:
        """Per policy endpoint: mean seconds of its successful calls, since the start and since the last
        look (from the model server's own Prometheus histogram; {} if it has none)."""
        try:
            answer = await exchange(self.peers, "get", self.model_server, "/metrics", timeout=PEER_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - latency is a nicety: the endpoints are listed without it
            return {}
        text = answer.payload.decode(errors="replace") if answer.status == 200 else ""
        totals: dict[str, list[float]] = {}
        for line in text.splitlines():
            if (match := POLICY_CALLS.match(line)) is not None:
                kind, endpoint, value = match.groups()
                totals.setdefault(endpoint, [0.0, 0.0])[kind == "count"] = float(value)
        latency = {}
        for endpoint, (total_s, calls) in totals.items():
            before_s, before_calls = self._policy_calls.get(endpoint, (0.0, 0.0))
            recent = (total_s - before_s) / (calls - before_calls) if calls > before_calls else None
            latency[endpoint] = {"mean_s": total_s / calls if calls else None, "recent_s": recent}
        self._policy_calls = {endpoint: (t, c) for endpoint, (t, c) in totals.items()}
        return latency

    async def _peer_status(self, which: str) -> dict | None:
        """The model server's endpoints (balanced model servers list them) or the resources server's
        sandbox hosts; None when the server does not say or cannot be reached."""
        server, path = (self.model_server, "/endpoints") if which == "model" else (self.resources_server, "/status")
        if self.peers is None or server is None:
            return None
        try:
            reply = await exchange(self.peers, "get", server, path, timeout=PEER_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the page says it could not be read, and why
            return {"error": f"{server}{path}: {exc!r}"}
        if reply.status != 200:
            return {"error": f"{server}{path} answered {reply.status}"} if reply.status != 404 else None
        answer = orjson.loads(reply.payload)
        if which == "model" and isinstance(answer.get("endpoints"), list):
            latency = await self._endpoint_latency()
            for endpoint in answer["endpoints"]:
                endpoint["latency"] = latency.get(str(endpoint.get("url")))
        return answer

    async def search(self, query: Search, offset: int = 0, limit: int = 50) -> dict:
        await self.index.refresh()
        total, page = self.index.search(query, offset, limit)
        return {
            "total": total,
            "offset": offset,
            "limit": limit,
            "items": [s.wire() for s in page],
            "indexed": len(self.index),
            "failure_types": self.index.failures(),
        }

    async def rollout(self, job_id: str) -> dict:
        if (run := self.runs.get(job_id)) is not None:
            record = run.wire()
        elif self.jobs.journal.opened and (text := (await self.jobs.journal.records([job_id])).get(job_id)):
            record = orjson.loads(text)
        else:
            raise HTTPException(404, f"no finished job {job_id!r} in the journal (running, or forgotten)")
        spans = self.spans_of(job_id) if self.spans_of is not None else []
        view = {k: v for k, v in record.items() if k not in ("response", "capture", "responses_create_params")}
        return {
            "job_id": job_id,
            "record": view,
            "verifier": {k: v for k, v in record.items() if k not in RECORD_FIELDS},
            "turns": turns(record, spans),
            "spans": spans,
            "task": _task_text(record),
        }


def _task_text(record: dict) -> str:
    """The row's prompt: its last user message."""
    items = (record.get("responses_create_params") or {}).get("input") or []
    if isinstance(items, str):
        return items
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return ""
