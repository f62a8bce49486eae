# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The grader's probe (tree.SCRIPT, in a real virtual environment's Python, isolated as in the sandbox):
whether something installed would be imported instead of the tests' package. The repository installed in
place (SWE-bench images: a .pth, or setuptools' editable finder, pointing into /testbed) and a namespace
portion (an empty placeholder over a hidden installed copy) are not; a regular package outside the
repository is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from resources_servers.swe.runners import GUARD_SOURCES
from resources_servers.swe.tree import SCRIPT

TESTS = ["calc/tests/test_add.py"]
FINDER = textwrap.dedent(
    """
    import importlib.abc, importlib.util, sys

    class Finder(importlib.abc.MetaPathFinder):  # as setuptools' __editable___*_finder.py maps a name to a path
        def find_spec(self, name, path=None, target=None):
            if name == "calc":
                return importlib.util.spec_from_file_location(
                    name, {init!r}, submodule_search_locations=[{package!r}]
                )

    sys.meta_path.append(Finder())
    """
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("probe-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    return root / "venv"


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def package(at: Path) -> Path:
    (at / "calc" / "tests").mkdir(parents=True)
    (at / "calc" / "__init__.py").write_text("")
    (at / "calc" / "tests" / "__init__.py").write_text("")
    (at / "calc" / "tests" / "test_add.py").write_text("def test_add():\n    pass\n")
    return at


def probed(venv: Path, repo: Path, tmp_path: Path) -> dict:
    job = tmp_path / "probe.job"
    job.write_text(
        json.dumps(
            [
                {
                    "do": "probe",
                    "seal": str(GUARD_SOURCES / "prorl_seal.py"),
                    "root": str(repo),
                    "env_paths": [],
                    "tests": TESTS,
                }
            ]
        )
    )
    out = tmp_path / "probe.out"
    run = subprocess.run(
        [str(venv / "bin/python"), "-I", "-c", SCRIPT, str(job), str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    done = json.loads(out.read_text())
    assert "failed" not in done, done
    return done["probe"]


@pytest.mark.parametrize("how", ["pth", "finder", "placeholder", "installed", "installed_elsewhere"])
def test_the_probe_names_only_a_regular_package_outside_the_repository(how, venv, tmp_path):
    site = site_packages(venv)
    for old in [*site.glob("prorl_probe_*"), site / "calc"]:
        subprocess.run(["rm", "-rf", str(old)], check=True)
    repo = package(tmp_path / "testbed")
    if how == "pth":  # `pip install -e .` of old: the repository on sys.path
        (site / "prorl_probe_editable.pth").write_text(f"{repo}\n")
    elif how == "finder":  # setuptools' editable finder, installed by an import line of a .pth
        init, pkg = str(repo / "calc" / "__init__.py"), str(repo / "calc")
        (site / "prorl_probe_finder.py").write_text(FINDER.format(init=init, package=pkg))
        (site / "prorl_probe_finder.pth").write_text("import prorl_probe_finder\n")
    elif how == "placeholder":  # an empty directory hides an installed copy: a namespace portion
        (site / "calc").mkdir()
    elif how == "installed":  # a real copy of the package installed beside the repository
        package(site)
    else:  # the repository installed in place, but from another checkout
        (site / "prorl_probe_editable.pth").write_text(f"{package(tmp_path / 'elsewhere')}\n")
    found = probed(venv, repo, tmp_path)
    assert found["tests"] == ["calc"], found
    if how.startswith("installed"):
        assert len(found["shadowed"]) == 1 and found["shadowed"][0].startswith("calc (at "), found
        assert str(repo) not in found["shadowed"][0], found
    else:
        assert found["shadowed"] == [], found
