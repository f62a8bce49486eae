# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Every dependency pyproject.toml lists is used: imported by the project's code, or listed below with
what it is there for (a dependency nobody imports is weight in every install, and a question for every
reader)."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions

from prorl_gym.paths import REPO_ROOT

SOURCES = ("prorl_gym", "resources_servers", "responses_api_agents", "responses_api_models", "benchmarks", "scripts")
# Listed, not imported: why each is there.
NOT_IMPORTED = {
    "httptools": "uvicorn parses HTTP with it when it is installed (else h11, pure Python)",
    "hydra-core": "nemo-gym's config layer; the floor stops pip backtracking",
    "setuptools": "a ceiling: hydra-core 1.3 imports pkg_resources, which setuptools 81 removes",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed_dependencies() -> list[str]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return [normalized(re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0]) for d in pyproject["project"]["dependencies"]]


def imported_top_level_names() -> set[str]:
    names = set()
    for source in SOURCES:
        for path in (REPO_ROOT / source).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.partition(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.partition(".")[0])
    return names


def test_every_listed_dependency_is_imported_or_says_why_it_is_listed():
    provides: dict[str, set[str]] = {}
    for top_level, distributions in packages_distributions().items():
        for distribution in distributions:
            provides.setdefault(normalized(distribution), set()).add(top_level)
    imported = imported_top_level_names()
    unused = [
        name
        for name in listed_dependencies()
        if name not in NOT_IMPORTED and not (provides.get(name, set()) & imported)
    ]
    assert not unused, f"listed in pyproject.toml, never imported: {unused} (drop them, or say why in NOT_IMPORTED)"


def test_the_reasons_name_listed_dependencies_only():
    assert set(NOT_IMPORTED) <= set(listed_dependencies())
