# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Write data/swebench_specs.json from the swebench package: what official.py reads at run time.

    python resources_servers/swe/data/swebench_specs.py [--out PATH]

- The log parser of each repository: swebench 5.0.2's `MAP_REPO_TO_PARSER_PY`, from the copy
  installed in the project's .venv (`make setup` installs it without its dependencies, with
  unidiff, the one its parsers import).
- The specs of each repository and version (test command, Python, commands run before the tests):
  swebench 4.1.0's `MAP_REPO_VERSION_TO_SPECS_PY`, the last release that ships them (5.x moved them
  into each dataset row's `eval_script`). Its wheel is downloaded here (pip, sha256-checked) and
  `harness/constants/python.py`, a module of plain data with no imports, is executed on its own.
- The file suffixes that are not tests (`NON_TEST_EXTS`, for the test directives), from 5.0.2.

`swebench_module(name)` imports a module of the installed swebench without running the package
initialisers that pull in docker, datasets and modal (`swebench.harness` imports them all): only
what runs offline. tests/test_official.py uses it to compare our log rules with swebench's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "swebench_specs.json"
SPECS_WHEEL = "swebench==4.1.0"
SPECS_SHA256 = "1243776f720047cc9e20a427f7a52b75c13a07abda6154fb60fe77f82ec8af57"
SPECS_MODULE = "swebench/harness/constants/python.py"
KEPT = ("test_cmd", "python", "eval_commands")  # what grading needs of a spec (not how to build its image)
# Packages of swebench whose __init__ imports what needs docker, datasets or modal: made bare here.
BARE_PACKAGES = ("swebench.harness",)


def swebench_module(name: str) -> types.ModuleType:
    """A module of the installed swebench (e.g. `swebench.harness.grading`), its heavy package
    initialisers skipped. ImportError (with the reason) if swebench is not installed."""
    found = importlib.util.find_spec("swebench")
    if found is None or not found.submodule_search_locations:
        raise ImportError("swebench is not installed (make setup installs swebench==5.0.2 without its dependencies)")
    root = Path(next(iter(found.submodule_search_locations)))
    for package in BARE_PACKAGES:
        if package not in sys.modules:
            bare = types.ModuleType(package)
            bare.__path__ = [str(root.joinpath(*package.split(".")[1:]))]
            sys.modules[package] = bare
    return importlib.import_module(name)


def installed_version() -> str:
    return importlib.import_module("swebench").__version__


def specs_source() -> str:
    """swebench 4.1.0's constants/python.py, from its wheel (downloaded, sha256-checked)."""
    with tempfile.TemporaryDirectory(prefix="swebench-specs-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, SPECS_WHEEL],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        digest = subprocess.run(["sha256sum", str(wheel)], capture_output=True, text=True, check=True).stdout
        if digest.split()[0] != SPECS_SHA256:
            raise SystemExit(f"{wheel.name}: sha256 {digest.split()[0]} != {SPECS_SHA256}")
        with zipfile.ZipFile(wheel) as archive:
            return archive.read(SPECS_MODULE).decode()


def build() -> dict:
    namespace: dict = {}
    exec(compile(specs_source(), SPECS_MODULE, "exec"), namespace)  # a pinned module of plain data, no imports
    all_specs = namespace["MAP_REPO_VERSION_TO_SPECS_PY"]
    parsers = swebench_module("swebench.harness.log_parsers.python").MAP_REPO_TO_PARSER_PY
    constants = swebench_module("swebench.harness.constants")
    repos = {}
    for repo in sorted(set(parsers) | set(all_specs)):
        versions = {
            version: {key: spec[key] for key in KEPT if spec.get(key)}
            for version, spec in sorted(all_specs.get(repo, {}).items())
        }
        parser = parsers.get(repo)
        repos[repo] = {"log_parser": parser.__name__ if parser else None, "versions": versions}
    registry = swebench_module("swebench.harness.log_parsers").PARSER_REGISTRY
    python_rules = {  # a 5.x row's `log_parser` names one of these (aliases included): the rule it is
        name: rule.__name__ for name, rule in registry.items() if rule.__module__.endswith("log_parsers.python")
    }
    return {
        "source": {
            "log_parsers": f"swebench {installed_version()} MAP_REPO_TO_PARSER_PY",
            "specs": f"{SPECS_WHEEL} (sha256 {SPECS_SHA256}) MAP_REPO_VERSION_TO_SPECS_PY",
            "non_test_exts": f"swebench {installed_version()} NON_TEST_EXTS",
        },
        "non_test_exts": list(constants.NON_TEST_EXTS),
        "log_parsers": dict(sorted(python_rules.items())),
        "repos": repos,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = build()
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(data['repos'])} repositories to {args.out}")


if __name__ == "__main__":
    main()
