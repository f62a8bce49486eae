# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The PyPI projects SWE tasks are built from: pure Python, tests in the sdist, deterministic.

Each names how its suite runs (the runner and its arguments), what its tests need beyond the
runner (pinned), the files not to inject bugs into, and its licence (recorded on every row).
Django and SymPy run a few small test modules of their large suites (seconds, not hours), with bugs
only in the modules those tests are about; they run with their own runners, as SWE-bench runs them.
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
    runner: str = "pytest"  # or unittest, django (tests/runtests.py), sympy (sympy.testing.runtests)
    test_requires: tuple[str, ...] = ()
    skip_sources: tuple[str, ...] = ()  # no bugs here (flaky or network-bound tests, generated tables)
    bug_sources: tuple[str, ...] = ()  # bugs only in these modules (default: every module of the package)


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
DJANGO_UTILS = (
    "text",
    "html",
    "http",
    "dateparse",
    "encoding",
    "datastructures",
    "numberformat",
    "regex_helper",
    "timesince",
    "duration",
    "ipv6",
    "dateformat",
    "crypto",
    "tree",
    "hashable",
    "functional",
)
SYMPY_TESTS = {  # test file -> the module its bugs go into
    "sympy/utilities/tests/test_iterables.py": "sympy/utilities/iterables.py",
    "sympy/utilities/tests/test_enumerative.py": "sympy/utilities/enumerative.py",
    "sympy/combinatorics/tests/test_permutations.py": "sympy/combinatorics/permutations.py",
    "sympy/combinatorics/tests/test_partitions.py": "sympy/combinatorics/partitions.py",
    "sympy/combinatorics/tests/test_subsets.py": "sympy/combinatorics/subsets.py",
    "sympy/combinatorics/tests/test_graycode.py": "sympy/combinatorics/graycode.py",
    "sympy/combinatorics/tests/test_prufer.py": "sympy/combinatorics/prufer.py",
    "sympy/ntheory/tests/test_multinomial.py": "sympy/ntheory/multinomial.py",
}
PROJECTS += [
    Project(
        "django",
        "5.2.8",
        "django/django",
        "23254866a5bb9a2cfa6004e8b809ec6246eba4b58a7589bc2772f1bcc8456c7f",
        "BSD-3-Clause",
        ".",
        " ".join(f"utils_tests.test_{name}" for name in DJANGO_UTILS),
        runner="django",
        test_requires=("asgiref==3.10.0", "sqlparse==0.5.3"),
        bug_sources=tuple(f"django/utils/{name}.py" for name in DJANGO_UTILS),
    ),
    Project(
        "sympy",
        "1.14.0",
        "sympy/sympy",
        "d3d3fe8df1e5a0b42f0e7bdf50541697dbe7d23746e894990c030e2b05e72517",
        "BSD-3-Clause",
        ".",
        " ".join(SYMPY_TESTS),
        runner="sympy",
        test_requires=("mpmath==1.3.0",),
        bug_sources=tuple(SYMPY_TESTS.values()),
    ),
]
