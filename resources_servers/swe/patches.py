# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's patch as the grader reads it: its file sections, and which of them never reach the tree.

A section is dropped (the rest of the patch still counts) when it would change what the grader
relies on rather than the code under test:

- paths outside the repository or inside `.git` (git's C-quoted names decoded first: `"b/\\056git"` is
  `.git`; every name any header line of the section could stand for is checked), symbolic links (a link
  can point a graded path anywhere), binary patches, submodules, and compiled code (`.pyc`, `.so`, ...:
  Python runs a `.pyc` in place of its source);
- the tests and what configures them: files of test_patch and of the test ids, `test_*.py`,
  `*_test.py`, `conftest.py`, anything under a tests/test/testing directory, and every file pytest
  reads configuration from (pytest.ini, .pytest.ini, pytest.toml, .pytest.toml, tox.ini, setup.cfg,
  pyproject.toml: whole files, whatever syntax the configuration is written in);
- interpreter start-up hooks (sitecustomize.py, usercustomize.py, *.pth);
- a new module at the top of an import root named like one the runner, the standard library, the
  sandbox's installed packages or the tests' own packages provide: it would be imported instead.

Files that configure tools through HOME (.gitconfig, .config/, .gitattributes, ...) are not dropped:
the grader's tools never read them (evaluate.py runs them with their own HOME and no global
config), and the result names them (`tool_config`) so the attempt is visible.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

TEST_DIRS = {"tests", "test", "testing"}
PYTEST_CONFIG = {"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "pyproject.toml"}
STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
COMPILED = (".pyc", ".pyo", ".so", ".pyd", ".dylib")
# What a naive grader's git, pip or python would read from HOME (the repository, in the agent's sandbox).
TOOL_CONFIG = (".gitconfig", ".gitattributes", ".gitmodules", ".config/", ".local/", ".pdbrc", ".netrc", ".pypirc")
# The test runner's own distributions (also kept out of task test environments: repos.RUNNER_DISTRIBUTIONS).
RUNNER_MODULES = {"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli", "pygments"}
# Standard-library names of the Pythons a sandbox may run (this one's, plus modules older ones still had).
STDLIB_MODULES = set(sys.stdlib_module_names) | {
    "distutils",
    "imp",
    "asynchat",
    "asyncore",
    "smtpd",
    "_distutils_hack",  # setuptools' start-up shim, imported by a .pth in most environments
    "setuptools",
    "pkg_resources",
}
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Section:
    """One file section of a git or plain unified diff."""

    paths: tuple[str, ...]  # every path it names (old and new side), repository-relative
    text: str
    new: bool  # it creates a file
    symlink: bool  # it creates or changes a symbolic link
    binary: bool = False  # a binary patch (nothing the agent's diff carries)
    submodule: bool = False  # a gitlink


def split_patch(patch: str) -> list[Section]:
    lines = patch.splitlines(keepends=True)
    git = any(line.startswith("diff --git ") for line in lines)
    starts = (
        [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
        if git
        else [
            i
            for i, line in enumerate(lines)
            if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        ]
    )
    sections = []
    for n, start in enumerate(starts):
        text = lines[start : starts[n + 1] if n + 1 < len(starts) else len(lines)]
        header = "".join(line for line in text if not line.startswith((" ", "+", "-", "@")))
        sections.append(
            Section(
                paths=tuple(sorted(_paths(text))),
                text="".join(text),
                new="new file mode" in header or any(line.startswith("--- /dev/null") for line in text),
                symlink=bool(re.search(rf"^{MODE_LINE}120000|^index \\S+ 120000", header, re.M)),
                binary=any(line.startswith(("GIT binary patch", "Binary files ")) for line in text),
                submodule=bool(re.search(rf"^{MODE_LINE}160000|^index \\S+ 160000", header, re.M)),
            )
        )
    return sections


MODE_LINE = "(new file |new |old |deleted file )?mode "
C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(text: str) -> tuple[str, str] | None:
    """A C-quoted name at the start of text, as git writes names with special characters (`"b/\\056git"`):
    (the decoded name, the rest after the closing quote); None if text does not start with one."""
    if not text.startswith('"'):
        return None
    out, i = bytearray(), 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode(errors="surrogateescape"), text[i + 1 :]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in C_ESCAPES:
                out.append(C_ESCAPES[nxt])
                i += 2
                continue
            if re.match(r"[0-7]{3}", text[i + 1 : i + 4]):
                out.append(int(text[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            return None  # an escape git never writes: not a name git would read either
        out += c.encode(errors="surrogateescape")
        i += 1
    return None


def _names(text: str) -> set[str]:
    """Every name a header's text may stand for: the decoded quoted name, or for a bare one each reading a
    reader might take (up to a tab, each part before a space): better too many than one missed."""
    text = text.rstrip("\n")
    quoted = unquote(text)
    if quoted is not None:
        return {quoted[0]}
    bare = text.split("\t", 1)[0]
    return {bare, *(bare[:i] for i, c in enumerate(bare) if c == " ")} - {""}


def _git_names(rest: str) -> set[str]:
    """The two names of a `diff --git` line, quoted or not (a bare pair is ambiguous: every split is read)."""
    rest = rest.rstrip("\n")
    first = unquote(rest)
    if first is not None:
        second = first[1].lstrip(" ")
        return {first[0], *_names(second)}
    names = set()
    for i, c in enumerate(rest):
        if c == " ":
            names |= {rest[:i]} | _names(rest[i + 1 :])
    return names


def _paths(text: list[str]) -> set[str]:
    """Every repository path a section's lines can name, decoded, with git's a/ b/ prefix removed."""
    paths: set[str] = set()
    for line in text:
        if line.startswith("diff --git "):
            paths |= {_strip(n) for n in _git_names(line[len("diff --git ") :])}
        elif line.startswith(("--- ", "+++ ")):
            paths |= {_strip(n) for n in _names(line[4:])}
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            paths |= _names(line.split(" ", 2)[2])
    return {p for p in paths if p}


def patch_files(patch: str) -> set[str]:
    return {p for section in split_patch(patch) for p in section.paths}


def _strip(name: str) -> str:
    """A header name without its first component (git's a/ and b/, -p1); /dev/null names no file."""
    if name == "/dev/null":
        return ""
    return name.split("/", 1)[1] if "/" in name else name


def is_test_path(path: str, task_files: set[str]) -> bool:
    """A test, or what runs with the tests: never the agent's to change."""
    parts = path.split("/")
    name = parts[-1]
    if path in task_files or name == "conftest.py":
        return True
    if (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"):
        return True
    return any(part in TEST_DIRS for part in parts[:-1])


def is_protected(path: str, task_files: set[str]) -> bool:
    """Reset to the graded base whenever the patch changed it (see the module docstring)."""
    name = path.rsplit("/", 1)[-1]
    startup = name in STARTUP_HOOKS or name.endswith(".pth")
    return is_test_path(path, task_files) or name in PYTEST_CONFIG or startup or compiled(path)


def unsafe_path(path: str) -> str | None:
    """Why a path may not be written at all, if so."""
    parts = path.split("/")
    if path.startswith("/") or ".." in parts:
        return "outside the repository"
    if any(part.lower().rstrip(". ") == ".git" or part.lower().startswith("git~") for part in parts):
        return "inside .git"
    if any(ord(c) < 32 or c == "\x7f" for c in path):
        return "a name with control characters"
    return None


def compiled(path: str) -> bool:
    """Code Python would run without its source (a .pyc is imported in place of its .py)."""
    return path.endswith(COMPILED) or "__pycache__" in path.split("/")


def tool_config(path: str) -> bool:
    return any(path == c or (c.endswith("/") and path.startswith(c)) for c in TOOL_CONFIG)


@dataclass(frozen=True)
class ImportNames:
    """Names a new top-level module must not take, by who provides them."""

    roots: tuple[str, ...]  # import roots inside the repository ("" for the repository itself, "src", ...)
    installed: frozenset[str] = frozenset()  # top-level names in the sandbox's site-packages and the task env
    tests: frozenset[str] = frozenset()  # the tests' own top-level packages or modules
    # top-level entries of each root in the graded base ("src/pkg"); None: not known yet (nothing is shadowed
    # until it is: the grader decides again from the tree after applying)
    existing: frozenset[str] | None = frozenset()

    def shadowed(self, path: str) -> str | None:
        """What a new file at `path` would shadow, if anything (a top-level entry the base already has
        is the project's own: editing or extending it shadows nothing new)."""
        if self.existing is None:
            return None
        for root in self.roots:
            prefix = f"{root}/" if root else ""
            if not path.startswith(prefix):
                continue
            top = path[len(prefix) :].split("/")[0]
            if f"{prefix}{top}" in self.existing:
                continue
            name = top.removesuffix(".py") if top.endswith(".py") or "/" in path[len(prefix) :] else None
            if not name or not IDENTIFIER.match(name):
                continue
            if name in RUNNER_MODULES:
                return f"shadows the test runner's module {name!r}"
            if name in STDLIB_MODULES:
                return f"shadows the standard library's module {name!r}"
            if name in self.installed:
                return f"shadows the installed module {name!r}"
            if name in self.tests:
                return f"shadows the tests' package {name!r}"
        return None


@dataclass
class PatchPlan:
    """What of the agent's patch reaches the graded tree, and why the rest does not."""

    kept: str
    dropped: dict[str, str] = field(default_factory=dict)  # path -> reason
    tool_config: list[str] = field(default_factory=list)  # paths a naive grader's tools would have read


def plan_patch(patch: str, task_files: set[str], names: ImportNames) -> PatchPlan:
    plan, kept = PatchPlan(kept=""), []
    for section in split_patch(patch):
        reason = next(
            (r for r in map(lambda p: _drop_reason(section, p, task_files, names), section.paths) if r), None
        )
        if reason is None and not section.paths:
            reason = "names no file"
        if reason:
            plan.dropped.update({p: reason for p in section.paths} or {"?": reason})
            continue
        kept.append(section.text)
        plan.tool_config += [p for p in section.paths if tool_config(p)]
    plan.kept = "".join(kept)
    plan.tool_config = sorted(set(plan.tool_config))
    return plan


def _drop_reason(section: Section, path: str, task_files: set[str], names: ImportNames) -> str | None:
    if reason := unsafe_path(path):
        return reason
    if section.symlink:
        return "a symbolic link"
    if section.binary:
        return "a binary patch"
    if section.submodule:
        return "a submodule"
    if compiled(path):
        return "compiled code"
    if is_test_path(path, task_files):
        return "a test file"
    name = path.rsplit("/", 1)[-1]
    if name in PYTEST_CONFIG:
        return "pytest configuration"
    if name in STARTUP_HOOKS or name.endswith(".pth"):
        return "an interpreter start-up hook"
    return names.shadowed(path) if section.new else None


def top_level_names(entries: Iterable[str]) -> frozenset[str]:
    """Importable top-level names among directory entries (packages, modules, extension modules)."""
    out = set()
    for entry in entries:
        name = entry.split(".", 1)[0] if entry.endswith((".py", ".so", ".pyd")) else entry
        if IDENTIFIER.match(name) and not entry.endswith((".dist-info", ".egg-info", ".data")):
            out.add(name)
    return frozenset(out)
