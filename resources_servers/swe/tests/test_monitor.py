# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The verdict from a run's events, as the grader reads them outside the test process."""

from __future__ import annotations

import json

from resources_servers.swe.canaries import CanaryPlan
from resources_servers.swe.monitor import judge
from resources_servers.swe.patches import is_protected
from resources_servers.swe.runners import Pytest

REPO = "/workspace"
F2P, P2P = "tests/test_a.py::test_fix", "tests/test_a.py::test_other"
RUN_F2P, RUN_P2P = "tests/test_a.py::test_plain_value", "tests/test_a.py::test_value_plain"  # renamed in place
CONTROL, CONTROL_P2P = "tests/test_a.py::test_empty_value", "tests/test_a.py::test_value_empty"
# the graded tests run under their new names; a control made from each
PLAN = CanaryPlan(renamed={F2P: RUN_F2P, P2P: RUN_P2P}, controls={CONTROL: F2P, CONTROL_P2P: P2P})
FILE = f"{REPO}/tests/test_a.py"


def event(**fields) -> str:
    return "@prorl " + json.dumps(fields)


def run(outcomes: dict[str, str], *, extra: list[str] = (), end: bool = True, code: dict | None = None) -> str:
    """The events of a clean run in which each test had `outcome` ("xfail" for an expected failure)."""
    lines = [event(e="sealed", abi=7, session=True), event(e="start", runner="pytest", trusted=["/usr", "/venv"])]
    for test in outcomes:
        lines.append(event(e="item", id=test, module=FILE, code=(code or {}).get(test, FILE)))
    for test, outcome in outcomes.items():
        call = {"outcome": "skipped", "xfail": True} if outcome == "xfail" else {"outcome": outcome, "xfail": False}
        lines += [
            event(e="report", id=test, when="setup", outcome="passed", xfail=False),
            event(e="report", id=test, when="call", **call),
            event(e="report", id=test, when="teardown", outcome="passed", xfail=False),
        ]
    lines += list(extra)
    if end:
        lines.append(event(e="end", status=0))
    return "\r\n".join(lines) + "\r\n"


def summary(outcomes: dict[str, str]) -> str:
    status = {"passed": "PASSED", "failed": "FAILED", "xfail": "XFAIL", "skipped": "SKIPPED"}
    return "=== short test summary info ===\n" + "".join(f"{status[o]} {t}\n" for t, o in outcomes.items())


def verdict(outcomes, plan=PLAN, log=None, **kw):
    channel = run(outcomes, **kw)
    return judge(
        Pytest(),
        [F2P, P2P],
        plan,
        channel,
        summary(outcomes) if log is None else log,
        REPO,
        lambda p: is_protected(p, set()),
    )


GOOD = {RUN_F2P: "passed", RUN_P2P: "passed", CONTROL: "failed", CONTROL_P2P: "failed"}


def test_a_clean_run():
    v = verdict(GOOD)  # the controls failed, the renamed tests passed
    assert v.statuses == {F2P: "passed", P2P: "passed"} and v.complete and not v.evidence and v.sealed == 7


def test_the_runners_output_must_agree():
    v = verdict(GOOD, log=summary(GOOD | {RUN_F2P: "failed"}))
    assert v.statuses[F2P] == "failed" and not v.evidence


def test_a_control_passing_beside_its_test_is_evidence():
    v = verdict(GOOD | {CONTROL: "passed"})  # both cannot pass: outcomes made up, or a value that equals anything
    assert v.statuses[F2P] == "passed" and any(f"a control of {F2P}" in e and "passed" in e for e in v.evidence)
    v = verdict({RUN_F2P: "passed", RUN_P2P: "passed", CONTROL: "failed"})  # a control never ran
    assert any(f"a control of {P2P}" in e and "missing" in e for e in v.evidence)
    v = verdict(GOOD | {RUN_F2P: "failed", CONTROL: "passed"})  # the test failed: nothing to say (honest wrong code)
    assert v.statuses[F2P] == "failed" and not v.evidence


def test_expected_failures_count_only_where_the_source_marks_them():
    v = verdict(GOOD | {RUN_P2P: "xfail"})
    assert v.statuses[P2P] == "failed" and "marks no xfail" in v.notes[P2P]
    marked = CanaryPlan(renamed=PLAN.renamed, controls=PLAN.controls, static_xfail={P2P})
    assert verdict(GOOD | {RUN_P2P: "xfail"}, plan=marked).statuses[P2P] == "passed"
    assert verdict(GOOD | {RUN_P2P: "skipped"}).statuses[P2P] == "failed"


def test_what_the_stream_cannot_take_back():
    forged = event(e="report", id=RUN_F2P, when="call", outcome="passed", xfail=False)
    v = verdict(GOOD | {RUN_F2P: "failed"}, extra=[forged])  # a pass said after the failure
    assert any("reported twice" in e for e in v.evidence)
    after = run(GOOD) + event(e="report", id=RUN_P2P, when="call", outcome="passed") + "\n"
    v = judge(Pytest(), [F2P, P2P], PLAN, after, summary(GOOD), REPO, lambda p: is_protected(p, set()))
    assert any("after the end" in e for e in v.evidence)
    v = verdict(GOOD, extra=["PASSED tests/test_a.py::test_plain_value"])
    assert any("unreadable" in e for e in v.evidence)
    v = verdict(GOOD, end=False)
    assert not v.complete


def test_tests_must_come_from_their_own_files():
    v = verdict(GOOD, code={RUN_F2P: f"{REPO}/pkg/core.py"})  # the test function replaced by the code under test
    assert v.statuses[F2P] == "failed" and any("comes from /workspace/pkg/core.py" in e for e in v.evidence)
    v = verdict(GOOD, code={RUN_F2P: "/usr/lib/python3/dist-packages/hypothesis/core.py"})  # installed: trusted
    assert v.statuses[F2P] == "passed" and not v.evidence
    v = verdict(GOOD, code={RUN_F2P: f"{REPO}/tests/helpers.py"})  # another file the grader reset
    assert v.statuses[F2P] == "passed"


def test_nothing_from_inside_the_run_makes_it_ungradeable():
    """A "setup error", a second seal, any event the guard never sends: evidence against the run, never a
    reason to drop it (whether a task can run at all is decided before the run: evaluate.py)."""
    for extra in (event(e="setup_error", text="tests at /usr"), event(e="sealed", abi=0, session=False)):
        v = verdict(GOOD, extra=[extra])
        assert any("events no guard sends" in e for e in v.evidence), v.evidence
    v = judge(Pytest(), [F2P], PLAN, event(e="start", runner="pytest", trusted=[]) + "\n", "", REPO, lambda p: True)
    assert v.sealed is None  # a run that never said it was sealed: the grader's (infrastructure) problem
