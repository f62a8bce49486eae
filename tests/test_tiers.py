# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The slow tier's list (tests/tiers.py) names tests that exist, each with its reason, and the two make targets
split the collection by the one marker the conftest sets from it (so each test is in exactly one tier)."""

from __future__ import annotations

import ast
import re

from prorl_gym.paths import REPO_ROOT
from tests.tiers import SLOW, in_slow_tier


def test_every_entry_names_a_test_file_or_folder_or_test_that_exists_and_says_why():
    for entry, reason in SLOW.items():
        path, _, name = entry.partition("::")
        assert (REPO_ROOT / path).exists(), entry
        assert len(reason) > 10, entry
        if name:
            tree = ast.parse((REPO_ROOT / path).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            assert name.split("[")[0] in names, entry


def test_an_entry_covers_its_file_its_tests_and_its_folder_only():
    assert in_slow_tier("tests/test_soak.py::test_x[a]", "tests/test_soak.py")
    assert in_slow_tier("tests/sandbox/ray/test_hosts.py::t", "tests/sandbox/ray")
    assert in_slow_tier("tests/test_a.py::test_b[1]", "tests/test_a.py::test_b")
    assert not in_slow_tier("tests/test_a.py::test_bc", "tests/test_a.py::test_b")
    assert not in_slow_tier("tests/test_soak_more.py::t", "tests/test_soak.py")
    assert not in_slow_tier("tests/sandbox/ray_more/test_x.py::t", "tests/sandbox/ray")


def test_make_test_and_make_test_slow_split_on_the_slow_marker_and_ci_runs_both():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = {m[0]: m[1] for m in re.findall(r"^([\w-]+):.*\n\t(.*pytest.*)$", makefile, re.M)}
    assert recipe["test"].endswith('-m "not slow"') and recipe["test-slow"].endswith("-m slow")
    ci = (REPO_ROOT / ".ci/run").read_text().splitlines()
    assert ci.index("make test") < ci.index("make test-slow")
