# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The grade, decided outside the test process from what it said as it ran.

The guard inside the sandbox writes one event per line (`@prorl {json}`) to the grader's channel as
things happen: the runner starting, the items collected (with the file each test's code comes from),
each report, problems it saw, the end. Those lines reached the grader while the run went on, so code
under test cannot take back what was said before it acted, and there is no key or report file in the
process to steal or rewrite. A test id counts as passed only when:

- it was collected from the file its id names, its code from that file, a test file the grader reset,
  or read-only installed code;
- every phase reported, once, with the call passed (an expected failure only where the graded source
  marks the test xfail / expectedFailure: one called or marked at run time by the code is a failure;
  skips and unexpected passes are failures);
- the runner's own summary says the same (swebench's log rules, runners.py);

and the run as a whole counts only when it ended, said nothing twice or after its end, wrote nothing
unreadable on the channel, and its canaries came out as the grader knew they must (canaries.py): every
decoy under a failing test's name and every must-fail copy failed. Graded tests run under the new
names canaries.py gave them; the verdict speaks of them by their own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from resources_servers.swe.canaries import CanaryPlan
from resources_servers.swe.runners import TestRunner

PREFIX = "@prorl "


@dataclass
class Verdict:
    statuses: dict[str, str]  # graded id -> passed / failed
    complete: bool  # the run reached its end
    evidence: list[str] = field(default_factory=list)  # why the run cannot be trusted (empty: it can)
    setup_error: str | None = None  # the task cannot run as staged (not the agent's doing)
    notes: dict[str, str] = field(default_factory=dict)  # graded id -> why an outcome did not count as a pass


def read_events(output: str) -> tuple[list[dict], int]:
    """(events, unreadable lines) from the grader's channel."""
    events, junk = [], 0
    for line in output.replace("\r", "").splitlines():
        if not line.strip():
            continue
        if not line.startswith(PREFIX):
            junk += 1
            continue
        try:
            event = json.loads(line[len(PREFIX) :])
        except ValueError:
            junk += 1
            continue
        if isinstance(event, dict) and isinstance(event.get("e"), str):
            events.append(event)
        else:
            junk += 1
    return events, junk


def judge(
    runner: TestRunner,
    graded: list[str],
    plan: CanaryPlan,
    channel: str,
    log: str,
    repo: str,
    protected: Callable[[str], bool],
) -> Verdict:
    """The verdict on a run of `graded` + the plan's canaries (see the module docstring)."""
    events, junk = read_events(channel)
    evidence = [f"{junk} unreadable lines on the grader's channel"] if junk else []
    if not events or events[0]["e"] != "start":
        return Verdict({t: "failed" for t in graded}, False, evidence + ["the runner never started"] * bool(events))
    if setup := next((e for e in events if e["e"] == "setup_error"), None):
        return Verdict({t: "failed" for t in graded}, False, evidence, setup_error=str(setup.get("text")))
    ends = [i for i, e in enumerate(events) if e["e"] == "end"]
    complete = bool(ends)
    if len(ends) > 1 or (ends and ends[0] != len(events) - 1):
        evidence.append("events after the end of the run")
    trusted = tuple(str(p).rstrip("/") + "/" for p in events[0].get("trusted") or [] if p)
    items: dict[str, dict] = {}
    reports: dict[str, dict[str, tuple[str, bool]]] = {}
    subtest_failed: set[str] = set()
    for event in events:
        kind, test = event["e"], str(event.get("id"))
        if kind == "problem":
            evidence.append(str(event.get("text")))
        elif kind == "item":
            if test in items and items[test] != event:
                evidence.append(f"{test} was collected twice, from different code")
            items[test] = event
        elif kind == "report" and event.get("sub"):  # one of a test's subtests: a failure fails the test
            if event.get("outcome") == "failed":
                subtest_failed.add(test)
        elif kind == "report":
            when = str(event.get("when"))
            if when in reports.setdefault(test, {}):
                evidence.append(f"{test} was reported twice ({when})")
            reports[test][when] = (str(event.get("outcome")), bool(event.get("xfail")))
    own = runner.parse(log, plan.run_ids(graded))
    static = {plan.run_id(t) for t in plan.static_xfail}
    repo_root = os.path.realpath(repo).rstrip("/") + "/"

    checked: dict[str, bool] = {}

    def collected_right(test: str) -> bool:
        if test not in checked:
            checked[test] = _collected_right(test)
        return checked[test]

    def _collected_right(test: str) -> bool:
        item, tid = items.get(test), runner.parse_id(test)
        if item is None:
            return False
        if tid is None:  # a doctest or another item kind: no test function to follow
            return True
        expected = os.path.realpath(repo_root + tid.file)
        module, code = item.get("module"), item.get("code")
        if module != expected:
            evidence.append(f"{test} was collected from {module}, not {expected}")
            return False
        if code and code != module:
            inside = code.startswith(repo_root) and protected(code[len(repo_root) :])
            if not inside and not code.startswith(trusted):
                evidence.append(f"the code of {test} comes from {code}")
                return False
        return True

    def status(test: str) -> str:
        """passed / xfail / failed as the guard saw it."""
        phases = reports.get(test, {})
        failed = test in subtest_failed or any(o == "failed" for o, _ in phases.values())
        if not collected_right(test) or "call" not in phases or failed:
            return "failed"
        outcome, xfail = phases["call"]
        if outcome == "passed" and not xfail:
            return "passed"
        return "xfail" if outcome == "skipped" and xfail else "failed"

    def passed(test: str) -> bool:
        seen, said = status(test), own.get(test)
        return seen == said and (seen == "passed" or (seen == "xfail" and test in static))

    statuses = {t: "passed" if passed(plan.run_id(t)) else "failed" for t in graded}
    notes = {}
    for t in graded:
        run = plan.run_id(t)
        if status(run) == "xfail" and run not in static:
            notes[t] = "an expected failure, but the graded source marks no xfail"
        elif any(outcome == "skipped" and not xfail for outcome, xfail in reports.get(run, {}).values()):
            notes[t] = "skipped"
    if complete:
        for test in plan.must_fail:
            seen, said = status(test), own.get(test, "missing")
            if seen == "failed" and said == "failed":
                continue
            shown = seen if test in items else "missing"
            if test in graded:  # a decoy under a failing test's own name
                evidence.append(
                    f"{test} is a decoy that always fails, yet it was {shown} ({said} by the runner's output): "
                    "outcomes were decided by the test's name"
                )
            else:
                evidence.append(f"a copy of a test that must fail ({test}) was {shown}, {said} by the runner's output")
    return Verdict(statuses, complete, evidence, notes=notes)
