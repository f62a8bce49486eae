# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard in a real browser: headless Chromium (Debian's, `make browser-deps`) driven by
playwright against a live stack (configs/math.yaml under ng_run, the scripted policy).

One stack for the module. A batch of 5 tasks x 4 samples runs with 150 ms per generation on 4 RUN
workers (a few seconds: long enough to watch); one task's samples are slow (1 s per generation,
five turns) against a 3 s RUN limit, so they fail with a RUN timeout after a turn or two. Screenshots go
to results/dashboard/ for a person to look at.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request

import pytest

from prorl_gym.dashboard.export import save_snapshot
from prorl_gym.jsonl import read_jsonl
from prorl_gym.paths import REPO_ROOT
from prorl_gym.testing import environment_stack

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser-deps installs Debian's, as root)"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[test]')"),
]

EXAMPLE = REPO_ROOT / "resources_servers" / "math" / "data" / "example.jsonl"
AGENT = "+math_agent.responses_api_agents.prorl_agent"
SCREENSHOTS = REPO_ROOT / "results" / "dashboard"
SLOW_ROW = 4  # its samples time out in RUN after a turn or two


def batch_rows() -> list[dict]:
    rows = read_jsonl(EXAMPLE)[:5]
    for k, row in enumerate(rows):
        metadata = {"scripted_mode": "coin"}  # a task's samples alternate right and wrong: rewards differ
        if k == SLOW_ROW:
            metadata = {"scripted_mode": "stateful", "scripted_latency_ms": "1000"}  # metadata values are strings
        row["responses_create_params"]["metadata"] = metadata
    return rows


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.msg = f"{exc.msg}: {exc.read()[:500]!r}"  # the service says why
        raise


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ray_cluster):
    overrides = [
        f"{AGENT}.max_run_workers=4",
        f"{AGENT}.run_timeout_s=3",
        f"{AGENT}.tracing.keep_recent=64",  # per-call timings in the transcript
        f"{AGENT}.dashboard.sample_s=0.5",
        f"{AGENT}.journal.dir={tmp_path_factory.mktemp('journal')}",
    ]
    logs = tmp_path_factory.mktemp("dash") / "logs"
    with environment_stack("math", logs, overrides, 150, ray_cluster) as stack:
        yield stack


@pytest.fixture(scope="module")
def browser():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def finished_batch(stack, browser):
    """The batch, watched live from submission to its end; what the live view showed on the way."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{stack.agent_url}/dashboard")
    expect(page.locator("#environment")).to_have_text("math")
    run_busy = page.locator('#stages tr[data-stage="run"] .busy')
    expect(run_busy).to_have_text("0 / 4")  # idle
    batch = post(f"{stack.agent_url}/jobs", {"rows": batch_rows(), "batch_id": "dash", "samples_per_row": 4})
    expect(run_busy).to_have_text(re.compile(r"^[1-4] / 4$"), timeout=20_000)  # the page, not reloaded, sees RUN work
    seen = {"run_busy": run_busy.inner_text(), "batch_row": page.locator('#batches tr[data-batch="dash"]').count()}
    page.screenshot(path=str(SCREENSHOTS / "live_running.png"), full_page=True)
    expect(page.locator("#finished-count")).to_have_text(str(len(batch["job_ids"])), timeout=60_000)
    expect(page.locator('#batches tr[data-batch="dash"]')).to_contain_text("20/20 done")
    expect(page.locator("#failures tbody")).to_contain_text("run/timeout")
    seen["throughput_points"] = page.locator("#chart-throughput path").get_attribute("d").count("L")
    page.screenshot(path=str(SCREENSHOTS / "live_finished.png"), full_page=True)
    yield page, batch, seen
    page.close()


def test_the_live_view_follows_a_running_batch_without_reloading(finished_batch):
    page, batch, seen = finished_batch
    assert re.fullmatch(r"[1-4] / 4", seen["run_busy"]) and seen["batch_row"] == 1
    assert seen["throughput_points"] >= 2, "the throughput chart has a line over time"
    assert page.locator('#stages tr[data-stage="eval"] td').nth(3).inner_text().endswith(" s")  # percentiles
    assert re.fullmatch(r"[\d.]+ / [\d.]+ s", page.locator("#endpoints td.latency").first.inner_text())
    assert page.locator("#hosts tbody tr").count() == 1  # the local backend's one host


def test_a_failed_rollout_found_by_the_search_shows_its_failure_and_transcript(finished_batch):
    page, batch, _ = finished_batch
    page.click('nav button[data-view="inspect"]')
    page.fill('#search-form input[name="batch"]', "dash")
    page.select_option("#failure-select", "any")
    page.click('#search-form button[type="submit"]')
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(4)  # the slow task's four samples
    expect(page.locator("#search-count")).to_contain_text("4 matching of 20 indexed")
    rows.first.click()
    detail = page.locator("#detail")
    expect(detail.locator(".failure").first).to_contain_text("run/timeout")
    expect(detail.locator(".turn").first).to_be_visible()  # the turns before the limit came (1 s each)
    assert 1 <= detail.locator(".turn").count() < 5, "stateful plays five turns: not all of them"
    first_call = detail.locator(".turn").first.locator(".call").first
    expect(first_call).to_contain_text("python")
    expect(first_call.locator(".arguments")).to_contain_text("answer")
    assert " s)" in first_call.inner_text(), "the tool call's own time, from its span"
    expect(detail.locator(".turn h4").first).to_contain_text("policy")
    page.screenshot(path=str(SCREENSHOTS / "failed_rollout.png"), full_page=True)


def test_the_side_by_side_view_shows_two_samples_of_one_task(finished_batch):
    page, _, _ = finished_batch
    page.click('nav button[data-view="inspect"]')
    page.fill('#search-form input[name="batch"]', "dash")
    page.select_option("#failure-select", "none")
    page.click('#search-form button[type="submit"]')
    expect(page.locator("#search-count")).to_contain_text("16 matching")
    row0 = page.locator("#results tbody tr", has=page.locator("td", has_text="dash/0/"))
    row0.first.locator("button.compare").click()
    panes = page.locator("#compare .pane")
    expect(panes).to_have_count(2)
    jobs = [panes.nth(k).locator(".rollout").get_attribute("data-job") for k in range(2)]
    assert jobs[0] != jobs[1] and all(job.startswith("dash/0/") for job in jobs), jobs
    for k in range(2):
        expect(panes.nth(k).locator(".turn")).to_have_count(2)  # python, then the boxed answer
    rewards = {panes.nth(k).locator("dl.kv dd").first.inner_text() for k in range(2)}
    assert rewards == {"1.00", "0.00"}, f"coin: a task's samples alternate right and wrong ({rewards})"
    page.locator("#compare").screenshot(path=str(SCREENSHOTS / "side_by_side.png"))


def test_the_api_pages_and_refuses_bad_queries_and_actions(stack, finished_batch):
    base = f"{stack.agent_url}/dashboard/api"
    first = get(f"{base}/rollouts?batch=dash&limit=7")
    second = get(f"{base}/rollouts?batch=dash&limit=7&offset=7")
    assert first["total"] == 20 and len(first["items"]) == 7 and len(second["items"]) == 7
    assert not {i["job_id"] for i in first["items"]} & {i["job_id"] for i in second["items"]}
    for bad in ("limit=0", "limit=100000", "offset=-1", "row=x"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(f"{base}/rollouts?{bad}")
        assert refused.value.code == 422, bad
    with pytest.raises(urllib.error.HTTPError) as missing:
        get(f"{base}/rollout?job_id=nope")
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as off:  # read-only unless dashboard.actions is set
        post(f"{base}/actions/cancel_batch", {"batch_id": "dash"})
    assert off.value.code == 403


def test_a_report_embeds_the_same_charts_drawn_from_a_snapshot_without_the_server(stack, browser, finished_batch):
    path = save_snapshot(stack.agent_url, SCREENSHOTS / "snapshot.html")
    assert path is not None
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(path.as_uri())
    expect(page.locator("#finished-count")).to_have_text("20")
    expect(page.locator("#failures tbody")).to_contain_text("run/timeout")
    assert page.locator("#chart-throughput path").count() == 1
    assert asked == [path.as_uri()], "a snapshot asks nothing of anyone"
    page.close()
