# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Canaries written into real test files and run by the real runners: graded tests renamed in place keep
their outcomes, controls (a literal of an equality assertion changed) fail beside their passing tests and
carry no mark, new names say nothing, expected-failure markers are read from the source."""

from __future__ import annotations

import ast
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from resources_servers.swe.canaries import FALLBACK_WORDS, plan_canaries
from resources_servers.swe.controls import CONTROLS_PER_TEST
from resources_servers.swe.runners import Pytest, Unittest

PYTEST, UNITTEST = Pytest(), Unittest()

FUNCTIONS = textwrap.dedent(
    '''
    import pytest

    from calc import add

    pytestmark = [pytest.mark.filterwarnings("ignore")]


    def helper(x):
        return x


    @pytest.mark.parametrize("a, b, total", [(1, 2, 3), (2, 2, 4)])
    def test_add_numbers(a, b, total):
        """Adds."""
        assert add(a, b) == total


    def test_add_decorated():
        @helper
        def inner():
            return add(1, 1)

        assert inner() == 2


    def test_add_early_return():
        if add(0, 0) == 0:
            return
        raise AssertionError("unreachable")


    @pytest.mark.xfail(reason="known")
    def test_add_strings():
        assert add("a", 1)


    test_generated = lambda: None  # noqa: E731
    '''
)
MIXIN = textwrap.dedent(
    """
    class AddMixin:
        def test_add_twice(self):
            assert self.add(self.add(1, 1), 1) == 3
    """
)
CLASSES = textwrap.dedent(
    """
    import unittest

    from calc import add
    from tests import AddMixin


    class AddTest(unittest.TestCase, AddMixin):
        add = staticmethod(add)

        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        @unittest.expectedFailure
        def test_add_none(self):
            add(None, 1)
    """
)


def repo(tmp_path: Path, correct: bool) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text(f"def add(a, b):\n    return a {'+' if correct else '-'} b\n")
    (tmp_path / "tests" / "__init__.py").write_text(MIXIN)
    (tmp_path / "tests" / "test_functions.py").write_text(FUNCTIONS)
    (tmp_path / "tests" / "test_classes.py").write_text(CLASSES)
    return tmp_path


F2P = [
    "tests/test_functions.py::test_add_numbers[1-2-3]",
    "tests/test_functions.py::test_add_numbers[2-2-4]",
    "tests/test_functions.py::test_add_decorated",
    "tests/test_classes.py::AddTest::test_add",
    "tests/test_classes.py::AddTest::test_add_twice",  # defined in the mixin
    "tests/test_functions.py::test_generated",  # made by an assignment: no source to copy
]
P2P = ["tests/test_functions.py::test_add_early_return", "tests/test_functions.py::test_add_strings"]


def plan_for(root: Path, runner=PYTEST, f2p=F2P, p2p=P2P, seed=0):
    files = ["tests/__init__.py", "tests/test_functions.py", "tests/test_classes.py"]
    sources = {f: (root / f).read_text() for f in files}
    plan = plan_canaries(f2p, p2p, sources, runner.parse_id, runner.format_id, random.Random(seed))
    for path, text in plan.sources.items():
        (root / path).write_text(text)
    return plan


def outcomes(root: Path, ids: list[str]) -> dict[str, str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", *ids],
        cwd=root,
        capture_output=True,
        text=True,
    )
    found = {}
    for line in run.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("PASSED", "FAILED", "XFAIL", "ERROR"):
            found[rest.split(" - ")[0]] = status
    return found


@pytest.mark.parametrize("correct", [True, False])
def test_renamed_tests_keep_their_outcomes_and_controls_fail(tmp_path, correct):
    root = repo(tmp_path, correct)
    plan = plan_for(root)
    graded = [t for t in F2P + P2P if "generated" not in t]
    assert plan.uncovered == ["tests/test_functions.py::test_generated"]
    assert sorted(plan.renamed) == sorted(graded)
    # each failing test with a literal in an equality assertion has CONTROLS_PER_TEST controls
    twins = sorted(set(plan.controls.values()))
    with_literals = [t for t in F2P if "numbers" not in t and "generated" not in t]  # `== total` is no literal
    assert twins == sorted(with_literals) and len(plan.controls) == CONTROLS_PER_TEST * len(with_literals)
    seen = outcomes(root, plan.run_ids(graded))
    for test in F2P[:-1]:
        assert seen[plan.run_id(test)] == ("PASSED" if correct else "FAILED"), (test, seen)
    assert seen[plan.run_id("tests/test_functions.py::test_add_early_return")] == "PASSED"
    assert seen[plan.run_id("tests/test_functions.py::test_add_strings")] == "XFAIL"
    assert all(seen[t] == "FAILED" for t in plan.controls), seen


def test_a_control_differs_from_its_test_by_one_value_and_carries_no_mark(tmp_path):
    root = repo(tmp_path, True)
    text = FUNCTIONS
    plan = plan_for(root, seed=5)
    after = (root / "tests" / "test_functions.py").read_text()
    tree = ast.parse(after)
    defs = {n.name: ast.get_source_segment(after, n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    original = defs[plan.run_id("tests/test_functions.py::test_add_decorated").split("::")[-1]]
    mutated = set()
    for control, twin in plan.controls.items():
        if twin != "tests/test_functions.py::test_add_decorated":
            continue
        copy = defs[control.split("::")[-1]]
        body_a, body_b = original.split("\n", 1)[1], copy.split("\n", 1)[1]  # all but the def line
        differing = [(a, b) for a, b in zip(body_a.splitlines(), body_b.splitlines()) if a != b]
        assert len(differing) == 1 and differing[0][0].replace("2", "") == differing[0][1].rstrip("0123456789")
        mutated.add(differing[0][1])
    assert len(mutated) == CONTROLS_PER_TEST  # each control a value of its own
    for mark in ("decoy", "must fail", "finally", "raise AssertionError"):
        assert after.count(mark) == text.count(mark), mark


def test_controls_go_anywhere_among_the_defs():
    """Not appended at the end: over a few plans, controls land before other tests of the file too."""
    between = 0
    for seed in range(8):
        sources = {"tests/__init__.py": MIXIN, "tests/test_functions.py": FUNCTIONS, "tests/test_classes.py": CLASSES}
        plan = plan_canaries(F2P, P2P, sources, PYTEST.parse_id, PYTEST.format_id, random.Random(seed))
        tree = ast.parse(plan.sources["tests/test_functions.py"])
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        controls = {c.split("::")[-1] for c in plan.controls}
        between += any(a in controls and b not in controls for a, b in zip(names, names[1:]))
    assert between >= 4


def test_renames_happen_where_a_test_is_defined_and_new_names_say_nothing(tmp_path):
    root = repo(tmp_path, True)
    before = (root / "tests" / "test_functions.py").read_text().splitlines()
    plan = plan_for(root)
    mixin = (root / "tests" / "__init__.py").read_text()
    twice = plan.run_id("tests/test_classes.py::AddTest::test_add_twice")
    assert twice.startswith("tests/test_classes.py::AddTest::test_")
    assert f"def {twice.rsplit('::', 1)[1]}(self)" in mixin  # inherited: renamed in the mixin
    after = (root / "tests" / "test_functions.py").read_text().splitlines()
    # without the controls, and with the old names back, the file is what it was (blank lines aside)
    text = (root / "tests" / "test_functions.py").read_text()
    tree = ast.parse(text)
    controls = {c.split("::")[-1] for c in plan.controls}
    lines = text.splitlines()
    for node in sorted(tree.body, key=lambda n: -n.lineno):
        if isinstance(node, ast.FunctionDef) and node.name in controls:
            del lines[min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1 : node.end_lineno]
    back = "\n".join(lines)
    for graded, run in plan.renamed.items():
        if graded.startswith("tests/test_functions.py"):
            back = back.replace(
                f"def {run.split('::')[-1].split('[')[0]}(", f"def {graded.split('::')[-1].split('[')[0]}("
            )
    assert [line for line in back.splitlines() if line.strip()] == [line for line in before if line.strip()]
    assert len(after) > len(before)  # the controls
    # words of the file's own test names (a file with few of them borrows common ones)
    words = {"add", "numbers", "decorated", "early", "return", "strings", "twice", "none", *FALLBACK_WORDS}
    fresh = [*plan.renamed.values(), *plan.controls]
    for test in fresh:
        name = test.split("::")[-1].split("[")[0]
        assert set(name.split("_")[1:]) <= words, name
        assert not any(original.split("::")[-1].split("[")[0] in name for original in F2P + P2P), name


def test_static_expected_failure_markers_are_read_from_the_source(tmp_path):
    root = repo(tmp_path, True)
    plan = plan_for(root, p2p=[*P2P, "tests/test_classes.py::AddTest::test_add_none"])
    assert plan.static_xfail == {
        "tests/test_functions.py::test_add_strings",
        "tests/test_classes.py::AddTest::test_add_none",
    }
    assert not any("strings" in t or "none" in t for t in plan.controls.values())  # an xfail test has no control


def test_unittest_ids(tmp_path):
    root = repo(tmp_path, False)
    f2p = ["tests.test_classes.AddTest.test_add", "tests.test_classes.AddTest.test_add_twice"]
    plan = plan_for(root, UNITTEST, f2p, [])
    assert all(plan.run_id(t).startswith("tests.test_classes.AddTest.test_") for t in f2p)
    assert sorted(set(plan.controls.values())) == f2p and len(plan.controls) == CONTROLS_PER_TEST * len(f2p)
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", *plan.run_ids(f2p)], cwd=root, capture_output=True, text=True
    )
    assert run.stderr.count("... FAIL") == len(f2p) + len(plan.controls), run.stderr  # the bug, and the controls


def test_fresh_names_are_found_where_every_word_of_the_file_begins_a_graded_name():
    """Every `test_<word>` graded: each name of the file's words alone contains one, so the planner must
    reach for the fallback words (it once gave up after a few random draws: a 500 from /verify)."""
    words = ["curry", "compose", "flip", "juxt", "complement"]
    text = "".join(f"def test_{w}():\n    assert True\n\n\n" for w in words)
    ids = [f"tests/test_ser.py::test_{w}" for w in words]
    for seed in range(20):
        plan = plan_canaries(
            ids, [], {"tests/test_ser.py": text}, PYTEST.parse_id, PYTEST.format_id, random.Random(seed)
        )
        fresh = [plan.run_id(t).split("::")[-1] for t in ids]
        assert len(set(fresh)) == len(ids) and not any(f"test_{w}" in n for w in words for n in fresh), fresh
        assert all(set(n.split("_")[1:]) <= set(words) | set(FALLBACK_WORDS) for n in fresh), fresh


def test_a_one_line_test_is_renamed_and_copied():
    sources = {"tests/test_one.py": "def test_a(): assert 1 + 1 == 2\n"}
    plan = plan_canaries(["tests/test_one.py::test_a"], [], sources, PYTEST.parse_id, PYTEST.format_id)
    assert list(plan.renamed) == ["tests/test_one.py::test_a"] and len(plan.controls) == CONTROLS_PER_TEST
    compile(plan.sources["tests/test_one.py"], "test_one.py", "exec")


def test_calls_to_a_renamed_test_follow_it(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "test_calls.py").write_text(
        textwrap.dedent(
            """
            from calc import add


            def test_add_sum(check=lambda x: x == 3):
                assert check(add(1, 2))


            def test_add_again():
                test_add_sum(check=lambda x: x > 2)


            class TestAdd:
                def test_add_method(self):
                    assert add(2, 2) == 4

                def test_add_twice(self):
                    self.test_add_method()
            """
        )
    )
    ids = ["test_calls.py::test_add_sum", "test_calls.py::test_add_again", "test_calls.py::TestAdd::test_add_twice"]
    ids.append("test_calls.py::TestAdd::test_add_method")
    sources = {"test_calls.py": (tmp_path / "test_calls.py").read_text()}
    plan = plan_canaries(ids[:2], ids[2:], sources, PYTEST.parse_id, PYTEST.format_id, random.Random(3))
    (tmp_path / "test_calls.py").write_text(plan.sources["test_calls.py"])
    assert not plan.uncovered and sorted(plan.renamed) == sorted(ids)
    seen = outcomes(tmp_path, plan.run_ids(ids))
    assert all(seen[plan.run_id(t)] == "PASSED" for t in ids), seen
    assert all(seen[t] == "FAILED" for t in plan.controls), seen


def test_a_test_defined_twice_and_called_by_name_keeps_its_name():
    source = "def test_twice():\n    pass\n\n\ndef test_twice():\n    pass\n\n\ndef test_caller():\n    test_twice()\n"
    plan = plan_canaries(
        ["t.py::test_twice"], ["t.py::test_caller"], {"t.py": source}, PYTEST.parse_id, PYTEST.format_id
    )
    assert plan.uncovered == ["t.py::test_twice"] and "t.py::test_caller" in plan.renamed


DJANGO_LIKE = textwrap.dedent(
    """
    import unittest

    from calc import add


    class EscapeLeadingSlashesTests(unittest.TestCase):
        def test(self):
            self.assertEqual(add(2, 3), 5)

        def test_leading_slashes_kept(self):
            self.assertEqual(add(0, 0), 0)


    class TestDurationMicroseconds(unittest.TestCase):
        def test(self):
            self.assertEqual(add(1, 0), 1)
    """
)


def test_a_test_named_test_is_renamed_and_controlled(tmp_path):
    """Django names test methods `test`: every candidate name contains it, and a planner that kept new names
    from containing it tried every word permutation (minutes on Django's files), then left the file unplanned."""
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "test_http.py").write_text(DJANGO_LIKE)
    f2p = ["test_http.EscapeLeadingSlashesTests.test"]
    p2p = ["test_http.EscapeLeadingSlashesTests.test_leading_slashes_kept", "test_http.TestDurationMicroseconds.test"]
    sources = {"test_http.py": DJANGO_LIKE}
    plan = plan_canaries(f2p, p2p, sources, UNITTEST.parse_id, UNITTEST.format_id, random.Random(5))
    assert not plan.uncovered and sorted(plan.renamed) == sorted(f2p + p2p), plan
    assert sum(t == f2p[0] for t in plan.controls.values()) == CONTROLS_PER_TEST, plan.controls
    assert {t for t in plan.controls.values()} == {f2p[0], p2p[1]}  # one more for the other class
    (tmp_path / "test_http.py").write_text(plan.sources["test_http.py"])
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", *plan.run_ids(f2p + p2p)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.stderr.count("... FAIL") == 1 + len(plan.controls), run.stderr  # the bug's test and every control
    assert run.stderr.count("... ok") == len(p2p), run.stderr
