# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's routes (prorl_gym/dashboard/server.py) on their own: the page and its files, the
live answer (computed once per cache_s whatever the number of viewers), actions off unless configured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from prorl_gym.dashboard.server import Dashboard, DashboardConfig
from prorl_gym.jobs.stragglers import StragglerControl
from prorl_gym.wire.jobs import CancelResult, JobLimits, Status


class StubJobs:
    def __init__(self):
        self.status_calls = 0
        self.cancelled: list[str] = []
        self.journal = SimpleNamespace(records=self._nothing, fields=self._nothing, opened=True)
        self.stragglers = StragglerControl(lambda *acted: None)  # no batch watched

    async def _nothing(self, *args):
        return {}

    def batch_views(self):
        return []

    async def status(self) -> Status:
        self.status_calls += 1
        return Status(
            stages={"init": {"workers": 1, "waiting": 0, "in_flight": 0}},
            active_jobs=0,
            retained_jobs=0,
            active_batches=0,
            retained_batches=0,
            completed=0,
            failed=0,
            cancelled=0,
            failed_by_type={},
            timings={},
            limits=JobLimits(),
        )

    async def cancel_batch(self, batch_id: str) -> CancelResult:
        self.cancelled.append(batch_id)
        return CancelResult(cancelled=[], settled=True)


def client(**config) -> tuple[TestClient, StubJobs]:
    jobs, app = StubJobs(), FastAPI()
    Dashboard(jobs, DashboardConfig(**config), environment="math", stages=dict).mount(app)
    return TestClient(app), jobs


def test_the_page_and_only_its_own_files_are_served():
    c, _ = client()
    page = c.get("/dashboard")
    assert page.status_code == 200 and "/dashboard/static/dashboard.js" in page.text
    assert c.get("/dashboard/static/dashboard.js").headers["content-type"].startswith("text/javascript")
    assert c.get("/dashboard/static/server.py").status_code == 404
    assert c.get("/dashboard/static/..%2Fserver.py").status_code == 404


def test_the_live_answer_is_computed_once_per_cache_period_for_any_number_of_viewers():
    c, jobs = client(cache_s=60)
    answers = [c.get("/dashboard/api/live").json() for _ in range(5)]
    assert jobs.status_calls == 1
    assert answers[0]["environment"] == "math" and answers[0]["endpoints"] is None and not answers[0]["actions"]


@pytest.mark.parametrize("token", [None, "s3cret"])
def test_actions_are_refused_unless_configured_and_then_need_the_token(token):
    off, jobs = client()
    assert off.post("/dashboard/api/actions/cancel_batch", json={"batch_id": "b"}).status_code == 403
    on, jobs = client(actions=True, action_token=token)
    if token:
        assert on.post("/dashboard/api/actions/cancel_batch", json={"batch_id": "b"}).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert on.post("/dashboard/api/actions/cancel_batch", json={"batch_id": "b"}, headers=wrong).status_code == 401
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = on.post("/dashboard/api/actions/cancel_batch", json={"batch_id": "b"}, headers=headers)
    assert answer.status_code == 200 and jobs.cancelled == ["b"]
    assert on.post("/dashboard/api/actions/drain_host", json={"host": "h"}, headers=headers).status_code == 404
