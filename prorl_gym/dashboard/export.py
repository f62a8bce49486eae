# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The dashboard's live view as one self-contained HTML file: the same page, script and charts, drawn
once from a saved `/dashboard/api/live?since=0` answer (window.PRORL_SNAPSHOT) instead of polling.
`make eval` reports and the soak write one (dashboard.html) before their stack stops."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from pathlib import Path

from prorl_gym.client import agent_url
from prorl_gym.dashboard.server import STATIC

SNAPSHOT_TIMEOUT_S = 10.0
DASHBOARD_HTML = "dashboard.html"  # a report's copy of the live view


def snapshot_html(snapshot: dict) -> str:
    page = (STATIC / "index.html").read_text()
    css = (STATIC / "dashboard.css").read_text()
    script = (STATIC / "dashboard.js").read_text()
    data = json.dumps(snapshot).replace("</", "<\\/")  # no "</script>" inside the script
    page = page.replace('<link rel="stylesheet" href="/dashboard/static/dashboard.css">', f"<style>\n{css}</style>")
    return page.replace(
        '<script src="/dashboard/static/dashboard.js"></script>',
        f"<script>window.PRORL_SNAPSHOT = {data};</script>\n<script>\n{script}</script>",
    )


def save_snapshot(agent_url: str, path: Path) -> Path | None:
    """Ask the agent for its live view and write it as `path`; None (and why, on stderr) if it cannot
    (an agent without the dashboard, or gone): a report is still written without it."""
    try:
        with urllib.request.urlopen(
            f"{agent_url.rstrip('/')}/dashboard/api/live?since=0", timeout=SNAPSHOT_TIMEOUT_S
        ) as r:
            snapshot = json.loads(r.read())
    except (OSError, ValueError) as exc:
        print(f"[dashboard] no snapshot of {agent_url}: {exc}", file=sys.stderr)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(snapshot_html(snapshot))
    return path


def find_agent(head_url: str, agent: str) -> str | None:
    """The URL of the agent server named `agent` of a running ng_run (its dashboard is at <it>/dashboard);
    None, said on stderr, if it is not listed."""
    try:
        return asyncio.run(agent_url(head_url, agent))
    except (OSError, LookupError) as exc:
        print(f"[dashboard] {agent}: no URL ({exc})", file=sys.stderr)
        return None
