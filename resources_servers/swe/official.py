# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What SWE-bench's official harness runs for a row, and how it reads the run, as data and rules.

The `swebench` package is the field's reference. Its specs (per repository and version: the test
command, the Python, the commands run before the tests) were last shipped in swebench 4.1.0
(`MAP_REPO_VERSION_TO_SPECS_PY`); 5.x moved them into each dataset row (`eval_script`, `log_parser`).
Its log parsers (`MAP_REPO_TO_PARSER_PY`) are 5.0.2's. Both are read once at data-prep time by
data/swebench_specs.py and committed as data/swebench_specs.json: nothing here imports swebench
(it pulls in docker, datasets, modal), and the server needs nothing but that file.

- `spec_for(repo, version)`: the row's spec (exact version, else major.minor), or None.
- `test_directives(repo, test_patch)`: what the harness appends to the test command (the files of
  test_patch; for Django, their test module labels).
- `eval_script_command(eval_script)`: a 5.x row's own test command (between its output markers).
- `read_log(rule, log)`: test name -> status (PASSED, FAILED, ERROR, SKIPPED, XFAIL, ...) read as the
  parser of that name does. Our own code; tests/test_official.py checks it equals swebench 5.0.2's
  on real logs of every runner and on the parsers' own edge cases.
- `status_of(case, statuses)`: a row's test id looked up as the harness does (a truncated
  parametrised id by its prefix).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SPECS_FILE = Path(__file__).resolve().parent / "data" / "swebench_specs.json"
STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")  # swebench's TestStatus values
PASSING = ("PASSED", "XFAIL")  # what `test_passed` accepts
START_MARKER, END_MARKER = ">>>>> Start Test Output", ">>>>> End Test Output"


@dataclass(frozen=True)
class Spec:
    repo: str
    version: str
    test_cmd: str
    log_parser: str
    python: str | None = None
    eval_commands: tuple[str, ...] = field(default=())  # exports run before the tests (e.g. a UTF-8 locale)


@functools.cache
def specs() -> dict:
    return json.loads(SPECS_FILE.read_text())


def log_parser_for(repo: str) -> str | None:
    """The name of the swebench parser that reads `repo`'s logs (None: a repository SWE-bench does not list)."""
    return specs()["repos"].get(repo, {}).get("log_parser")


def spec_for(repo: str, version: str | None) -> Spec | None:
    """The row's spec: its version exactly, else its major.minor ("5.2.8" -> "5.2"); None if none."""
    entry = specs()["repos"].get(repo)
    if entry is None or not version:
        return None
    versions = entry.get("versions", {})
    short = ".".join(str(version).split(".")[:2])
    found = versions.get(str(version)) or versions.get(short)
    if not found or not found.get("test_cmd"):
        return None
    return Spec(
        repo,
        str(version),
        found["test_cmd"],
        entry["log_parser"],
        found.get("python"),
        tuple(found.get("eval_commands", ())),
    )


def test_directives(repo: str, test_patch: str) -> list[str]:
    """The files test_patch changes, without data files; Django's as test module labels
    (`tests/a/b.py` -> `a.b`), as swebench's get_test_directives."""
    found = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    found = [d for d in found if not any(d.endswith(ext) for ext in specs()["non_test_exts"])]
    if repo == "django/django":
        found = [d.removesuffix(".py").removeprefix("tests/").replace("/", ".") for d in found]
    return found


def eval_script_command(eval_script: str) -> str | None:
    """The test command of a 5.x row's eval script: the lines between its output markers."""
    lines = eval_script.splitlines()
    starts = [i for i, line in enumerate(lines) if START_MARKER in line]
    ends = [i for i, line in enumerate(lines) if END_MARKER in line]
    if not starts or not ends or ends[0] <= starts[0] + 1:
        return None
    return "\n".join(lines[starts[0] + 1 : ends[0]]).strip() or None


def runner_of(row_runner: str | None, repo: str, version: str | None, eval_script: str = "") -> tuple[str, str]:
    """(our runner, its arguments) for a row: its own `test_runner`, else what the test command of its
    5.x `eval_script` or of its spec runs: Django's `tests/runtests.py <args>`, SymPy's `bin/test`, or
    pytest (whose options the pytest runner sets itself: -rA is one of them)."""
    if row_runner:
        return row_runner, ""
    command = eval_script_command(eval_script) if eval_script else None
    if command is None and (spec := spec_for(repo, version)) is not None:
        command = spec.test_cmd
    words = (command or "").split()
    for i, word in enumerate(words):
        if word.endswith("tests/runtests.py"):
            return "django", " ".join(_options(words[i + 1 :]))
        if word.endswith("bin/test"):
            return "sympy", ""
    return "pytest", ""


def _options(words: list[str]) -> list[str]:
    """The options of a command line (`--parallel 1` with its number), not its test labels."""
    kept, i = [], 0
    while i < len(words):
        if words[i].startswith("-"):
            kept.append(words[i])
            if "=" not in words[i] and i + 1 < len(words) and words[i + 1].isdigit():
                kept.append(words[i + 1])
                i += 1
        i += 1
    return kept


# ---------------------------------------------------------------------- the log rules


def _status_line(line: str) -> bool:
    return line.startswith(STATUSES)


def _skip_summary(status: str, name: str) -> bool:
    """pytest's `SKIPPED [N] path:line: reason` summary: [N] is a count, not a test."""
    return status == "SKIPPED" and re.fullmatch(r"\[\d+\]", name) is not None


def read_pytest(log: str) -> dict[str, str]:
    """`STATUS id` lines anywhere in the log (a FAILED line's ` - message` dropped): id = first word."""
    found = {}
    for line in log.split("\n"):
        if not _status_line(line):
            continue
        words = (line.replace(" - ", " ") if line.startswith("FAILED") else line).split()
        if len(words) > 1 and not _skip_summary(words[0], words[1]):
            found[words[1]] = words[0]
    return found


def _short_option(name: str) -> str:
    """A parameter that is an absolute path is kept as its last component (`[/tmp/x/a.txt]` -> `[/a.txt]`)."""
    match = re.search(r"(.*?)\[(.*)\]", name)
    if not match:
        return name
    head, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{head}[{option}]"


def read_pytest_options(log: str) -> dict[str, str]:
    return {_short_option(name): status for name, status in read_pytest(log).items()}


def read_pytest_v2(log: str) -> dict[str, str]:
    """Colour codes and control characters removed; the whole rest of a `STATUS id` line is the id (a
    FAILED line's message cut at ` - `); older pytest's `id STATUS` progress lines too."""
    found = {}
    controls = str.maketrans("", "", "".join(map(chr, range(1, 32))))
    for line in log.split("\n"):
        line = re.sub(r"\[(\d+)m", "", line).translate(controls)
        if _status_line(line):
            words = (line.split(" - ", 1)[0] if line.startswith("FAILED") else line).split()
            if len(words) >= 2 and not _skip_summary(words[0], words[1]):
                found[" ".join(words[1:])] = words[0]
        elif line.endswith(STATUSES):
            words = line.split()
            if len(words) >= 2:
                found[" ".join(words[:-1])] = words[-1]
    return found


def read_matplotlib(log: str) -> dict[str, str]:
    return read_pytest(log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


def read_seaborn(log: str) -> dict[str, str]:
    found = {}
    for line in log.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith("FAILED"):
            found[words[1]] = "FAILED"
        elif " PASSED " in line:
            if words[1] == "PASSED":
                found[words[0]] = "PASSED"
        elif line.startswith("PASSED"):
            found[words[1]] = "PASSED"
    return found


def read_sympy(log: str) -> dict[str, str]:
    """bin/test --verbose: `test_name ok|F|E` per test; a failure's `___ path.py:test_name ___` header
    also names it (as `path.py:test_name`)."""
    found = {f"{path}.py:{name}": "FAILED" for _, path, name, _ in re.findall(r"(_*) (.*)\.py:(.*) (_*)", log)}
    for line in log.split("\n"):
        line = line.strip()
        if not line.startswith("test_"):
            continue
        for suffix, status in ((" E", "ERROR"), (" F", "FAILED"), (" ok", "PASSED")):
            if line.endswith(suffix):
                found[line.split()[0]] = status
    return found


DJANGO_PASS = (" ... ok", " ... OK", " ...  OK")
# A test's `... ok` interrupted by a multi-line message (seen in SWE-bench's logs).
DJANGO_INTERRUPTED = (
    r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)


def read_django(log: str) -> dict[str, str]:
    """runtests.py --verbosity 2: `description ... ok|skipped|FAIL|ERROR`, where the description is
    `test_x (module.Class[.test_x])` or, for a test with a docstring, its first line; `FAIL: ` /
    `ERROR: ` headers; an `ok` alone on a line after output the test printed."""
    found, previous = {}, None
    for line in log.split("\n"):
        line = line.strip()
        if "--version is equivalent to version" in line:
            found["--version is equivalent to version"] = "PASSED"
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in DJANGO_PASS:
            if line.endswith(suffix):
                if line.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()  # a migration's output before the test's line
                found[line.rsplit(suffix, 1)[0]] = "PASSED"
                break
        if " ... skipped" in line:
            found[line.split(" ... skipped")[0]] = "SKIPPED"
        if line.endswith(" ... FAIL"):
            found[line.split(" ... FAIL")[0]] = "FAILED"
        if line.startswith("FAIL:"):
            found[line.split()[1].strip()] = "FAILED"
        if line.endswith(" ... ERROR"):
            found[line.split(" ... ERROR")[0]] = "ERROR"
        if line.startswith("ERROR:"):
            found[line.split()[1].strip()] = "ERROR"
        if line.lstrip().startswith("ok") and previous is not None:
            found[previous] = "PASSED"
    for pattern in DJANGO_INTERRUPTED:
        for match in re.finditer(pattern, log, re.MULTILINE):
            found[match.group(1)] = "PASSED"
    return found


LOG_RULES: dict[str, Callable[[str], dict[str, str]]] = {
    "parse_log_pytest": read_pytest,
    "parse_log_pytest_options": read_pytest_options,
    "parse_log_pytest_v2": read_pytest_v2,
    "parse_log_django": read_django,
    "parse_log_seaborn": read_seaborn,
    "parse_log_sympy": read_sympy,
    "parse_log_matplotlib": read_matplotlib,
}


def read_log(rule: str, log: str) -> dict[str, str]:
    """test name -> status, as the swebench parser named `rule` reads `log`."""
    try:
        return LOG_RULES[rule](log)
    except KeyError:
        raise ValueError(f"no log rule {rule!r}; known: {sorted(LOG_RULES)}") from None


def status_of(case: str, statuses: dict[str, str]) -> str | None:
    """The status of a row's test id (None: not in the log). A parametrised id cut short inside its
    brackets (SWE-bench Verified has 676) matches the names it begins, when they agree on pass or fail."""
    if case in statuses:
        return statuses[case]
    if case.count("[") > case.count("]"):
        matches = [name for name in statuses if name.startswith(case)]
        if matches and len({statuses[name] in PASSING for name in matches}) == 1:
            return statuses[matches[0]]
    return None
