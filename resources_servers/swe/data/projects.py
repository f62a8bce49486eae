# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The PyPI projects SWE tasks are built from: pure Python, tests in the sdist, deterministic.

Each names how its suite runs (the runner and its arguments), what its tests need beyond the
runner (pinned), the files not to inject bugs into, and its licence (recorded on every row).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    repo: str  # on GitHub, as SWE-bench's `repo`
    sha256: str  # of the sdist
    license: str
    pythonpath: str  # relative to the repository ("src" for src layouts)
    tests: str  # the suite: pytest arguments (paths, -m, --ignore), or the unittest package to discover
    runner: str = "pytest"  # or unittest
    test_requires: tuple[str, ...] = ()
    skip_sources: tuple[str, ...] = ()  # no bugs here (flaky or network-bound tests, generated tables)


PROJECTS = [
    Project(
        "toolz",
        "1.2.0",
        "pytoolz/toolz",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        "BSD-3-Clause",
        ".",
        "toolz",
    ),
    Project(
        "sqlparse",
        "0.6.1",
        "andialbrecht/sqlparse",
        "ca722573f848ff2d30e40ea30f53a104b7dea7635ea9285891263eb2c58fb6e7",
        "BSD-3-Clause",
        ".",
        "tests",
    ),
    Project(
        "cachetools",
        "8.0.1",
        "tkem/cachetools",
        "deb1d376d4d28c2f33f3e3058043b005e0af75c35c094bd54053e27d2906ad95",
        "MIT",
        "src",
        "tests",
    ),
    Project(
        "more-itertools",
        "11.2.1",
        "more-itertools/more-itertools",
        "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
        "MIT",
        ".",
        "tests",
        runner="unittest",
    ),
    Project(
        "humanize",
        "4.17.0",
        "python-humanize/humanize",
        "1d6a36c453dbfbb3f0b34601d2e0b4ce5d48d780305cd45714843f0068fde6ac",
        "MIT",
        "src",
        "--ignore=tests/test_benchmarks.py tests",
        test_requires=("freezegun==1.5.5",),
    ),
    Project(
        "itsdangerous",
        "2.2.0",
        "pallets/itsdangerous",
        "e0050c0b7da1eea53ffaf149c0cfbb5c6e2e2b69c4bef22c81fa6eb73e5f6173",
        "BSD-3-Clause",
        "src",
        "tests",
        test_requires=("freezegun==1.5.5",),
    ),
    Project(
        "marshmallow",
        "4.4.0",
        "marshmallow-code/marshmallow",
        "9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e",
        "MIT",
        "src",
        "tests",
        test_requires=("simplejson==4.3.0",),
    ),
    Project(
        "semver",
        "3.1.1",
        "python-semver/python-semver",
        "149b26cabada6f63212f97e94505d21578cb1d280cf714827f328d5e70765fea",
        "BSD-3-Clause",
        "src",
        "tests",
    ),
    Project(
        "boltons",
        "26.2.0",
        "mahmoud/boltons",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        "BSD-3-Clause",
        ".",
        "--ignore=tests/test_socketutils.py tests",
        skip_sources=("boltons/socketutils.py",),
    ),
    Project(
        "funcy",
        "2.1",
        "Suor/funcy",
        "8979feb3de7120afd1d00e5a8eae810c1942e4bfbc91697151e9ee1e49f79284",
        "BSD-3-Clause",
        ".",
        "tests",
        test_requires=("whatever==0.7",),
    ),
]
