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

and the run as a whole counts only when it was sealed as the grader's probe said it can be (the seal's
event comes first, before any code of the repository ran: prorl_seal.py), it ended, said nothing twice
or after its end, sent no event the guard never sends, wrote nothing unreadable on the channel, and no
control (controls.py) passed beside the test it was made from. Graded tests run under the new names
canaries.py gave them; the verdict speaks of them by their own. Nothing from inside the run can make
the task "ungradeable": whether it can run at all was decided before it started (evaluate.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from resources_servers.swe.canaries import CanaryPlan
from resources_servers.swe.runners import TestRunner

PREFIX = "@prorl "
EVENTS = {"sealed", "start", "item", "report", "problem", "note", "end"}  # what the seal and the guards send


@dataclass
class Verdict:
    statuses: dict[str, str]  # graded id -> passed / failed
    complete: bool  # the run reached its end
    evidence: list[str] = field(default_factory=list)  # why the run cannot be trusted (empty: it can)
    sealed: int | None = None  # the Landlock ABI the run was sealed with, as its first event said
    notes: dict[str, str] = field(default_factory=dict)  # graded id -> why an outcome did not count as a pass


def read_events(output: str) -> tuple[list[dict], list[str]]:
    """(events, unreadable lines) from the grader's channel."""
    events, junk = [], []
    for line in output.replace("\r", "").splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line[len(PREFIX) :]) if line.startswith(PREFIX) else None
        except ValueError:
            event = None
        if isinstance(event, dict) and isinstance(event.get("e"), str):
            events.append(event)
        else:
            junk.append(line)
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
    evidence = [f"{len(junk)} unreadable lines on the grader's channel (the first: {junk[0][:200]!r})"] if junk else []
    sealed = events.pop(0).get("abi") if events and events[0]["e"] == "sealed" else None
    if not events or events[0]["e"] != "start":
        failed = {t: "failed" for t in graded}
        return Verdict(failed, False, evidence + ["the runner never started"] * bool(events), sealed=sealed)
    complete = _check_shape(events, evidence)
    trusted = tuple(str(p).rstrip("/") + "/" for p in events[0].get("trusted") or [] if p)
    seen = _Seen(runner, events, evidence, os.path.realpath(repo).rstrip("/") + "/", trusted, protected)
    own = runner.parse(log, plan.run_ids(graded))
    static = {plan.run_id(t) for t in plan.static_xfail}

    def passed(test: str) -> bool:
        status, said = seen.status(test), own.get(test)
        return status == said and (status == "passed" or (status == "xfail" and test in static))

    statuses = {t: "passed" if passed(plan.run_id(t)) else "failed" for t in graded}
    notes = _notes(seen, plan, graded, static)
    for control, twin in plan.controls.items():
        status, said = seen.status(control), own.get(control, "missing")
        if statuses.get(twin) == "passed" and not (status == "failed" and said == "failed"):
            shown = status if control in seen.items else "missing"
            evidence.append(
                f"a control of {twin} (one of its assertions changed, so that both cannot pass) was {shown}, "
                f"{said} by the runner's output: outcomes were made up, or a value compares equal to anything"
            )
    return Verdict(statuses, complete, evidence, sealed=sealed, notes=notes)


def _check_shape(events: list[dict], evidence: list[str]) -> bool:
    """Whether the run ended; what no guard sends and anything after the end go to `evidence`."""
    kinds = {str(e["e"]) for e in events}
    if strange := sorted(kinds - (EVENTS - {"sealed"})):  # a second seal, a "setup error", ...: none is the guard's
        evidence.append(f"events no guard sends: {strange}")
    ends = [i for i, e in enumerate(events) if e["e"] == "end"]
    if len(ends) > 1 or (ends and ends[0] != len(events) - 1):
        evidence.append("events after the end of the run")
    return bool(ends)


class _Seen:
    """What the guard's events said of each test: where it was collected from, its phases' outcomes.
    What they show of tampering goes to `evidence`, in the order it is found."""

    def __init__(
        self,
        runner: TestRunner,
        events: list[dict],
        evidence: list[str],
        repo_root: str,
        trusted: tuple[str, ...],
        protected: Callable[[str], bool],
    ):
        self.runner, self.evidence, self.repo_root = runner, evidence, repo_root
        self.trusted, self.protected = trusted, protected
        self.items: dict[str, dict] = {}
        self.reports: dict[str, dict[str, tuple[str, bool]]] = {}
        self.subtest_failed: set[str] = set()
        self.checked: dict[str, bool] = {}
        for event in events:
            self._read(event)

    def _read(self, event: dict) -> None:
        kind, test = event["e"], str(event.get("id"))
        if kind == "problem":
            self.evidence.append(str(event.get("text")))
        elif kind == "item":
            if test in self.items and self.items[test] != event:
                self.evidence.append(f"{test} was collected twice, from different code")
            self.items[test] = event
        elif kind == "report" and event.get("sub"):  # one of a test's subtests: a failure fails the test
            if event.get("outcome") == "failed":
                self.subtest_failed.add(test)
        elif kind == "report":
            when = str(event.get("when"))
            if when in self.reports.setdefault(test, {}):
                self.evidence.append(f"{test} was reported twice ({when})")
            self.reports[test][when] = (str(event.get("outcome")), bool(event.get("xfail")))

    def collected_right(self, test: str) -> bool:
        if test not in self.checked:
            self.checked[test] = self._collected_right(test)
        return self.checked[test]

    def _collected_right(self, test: str) -> bool:
        item, tid = self.items.get(test), self.runner.parse_id(test)
        if item is None:
            return False
        if tid is None:  # a doctest or another item kind: no test function to follow
            return True
        expected = os.path.realpath(self.repo_root + tid.file)
        module, code = item.get("module"), item.get("code")
        if module != expected:
            self.evidence.append(f"{test} was collected from {module}, not {expected}")
            return False
        if code and code != module:
            inside = code.startswith(self.repo_root) and self.protected(code[len(self.repo_root) :])
            if not inside and not code.startswith(self.trusted):
                self.evidence.append(f"the code of {test} comes from {code}")
                return False
        return True

    def status(self, test: str) -> str:
        """passed / xfail / failed as the guard saw it."""
        phases = self.reports.get(test, {})
        failed = test in self.subtest_failed or any(o == "failed" for o, _ in phases.values())
        if not self.collected_right(test) or "call" not in phases or failed:
            return "failed"
        outcome, xfail = phases["call"]
        if outcome == "passed" and not xfail:
            return "passed"
        return "xfail" if outcome == "skipped" and xfail else "failed"


def _notes(seen: _Seen, plan: CanaryPlan, graded: list[str], static: set[str]) -> dict[str, str]:
    """graded id -> why its outcome did not count as a pass, where the outcome says it."""
    notes = {}
    for t in graded:
        run = plan.run_id(t)
        if seen.status(run) == "xfail" and run not in static:
            notes[t] = "an expected failure, but the graded source marks no xfail"
        elif any(outcome == "skipped" and not xfail for outcome, xfail in seen.reports.get(run, {}).values()):
            notes[t] = "skipped"
    return notes


def score(grading: Any, verdict: Verdict, log_text: str, timed_out: bool, started: float) -> dict:
    """reward 1.0 iff every graded test passed, by the guard's events and the runner's output alike, and
    the run can be trusted. grading: its test_ids and `passed` (grading.Grading): F2P and P2P are counted
    per id of the row (a Django docstring line or a SymPy name passes when every test it names passed)."""
    ids = grading.test_ids
    results = verdict.statuses
    failed = [t for t in ids if results.get(t) != "passed"]
    tampered = bool(verdict.evidence)
    fields = {
        "reward": 1.0 if not failed and verdict.complete and not tampered else 0.0,
        "runner_tampered": tampered,
        "tamper_evidence": verdict.evidence[:20],
        "tests_passed": len(ids) - len(failed),
        "tests_failed": len(failed),
        "failed_tests": failed[:50],
        "fail_to_pass_passed": grading.passed(grading.row_f2p, results),
        "pass_to_pass_passed": grading.passed(grading.row_p2p, results),
        "tests_timed_out": timed_out,
        "eval_seconds": round(time.monotonic() - started, 2),
        "log_tail": log_text[-2000:] if failed or tampered or not verdict.complete else "",
    }
    fields["resolved"] = fields["reward"] == 1.0
    if tampered:
        fields["reason"] = "runner_tampered"
    elif timed_out:
        fields["reason"] = "the tests timed out"
    elif not verdict.complete:
        fields["reason"] = "the test run did not complete"
    elif failed:
        fields["reason"] = f"{len(failed)} of {len(ids)} tests did not pass"
        kinds = sorted({note for t, note in verdict.notes.items() if t in failed})
        if kinds:
            fields["reason"] += f" ({'; '.join(kinds)})"
    fields["test_notes"] = dict(list(verdict.notes.items())[:20])
    return fields
