# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The issue text of an injected bug for data/prepare.py: a GitHub-issue-like problem statement.

Written from the first failing test of the mutation: a seeded title and introduction, the
failing test code (or the statement where it fails) as the reproduction, the error lines of
its traceback as the observed result, and the names of other tests that fail the same way.
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING

from resources_servers.swe.patches import is_protected

if TYPE_CHECKING:
    from resources_servers.swe.data.mutations import Mutation
    from resources_servers.swe.data.projects import Project

TITLES = [
    "`{name}` {symptom}",
    "Unexpected behaviour of `{qual}`",
    "Bug in `{qual}`: it {symptom}",
    "{name}() {symptom} in {project} {version}",
]
INTROS = [
    "After upgrading to {project} {version}, `{qual}` {symptom}. A minimal example, adapted from the project's tests:",
    "`{qual}` (in `{path}`) {symptom}. Here is how to reproduce it:",
    "I think there is a regression in `{qual}`: it {symptom}. This snippet (from `{test_file}`) shows it:",
]
OUTCOMES = ["Running it gives:", "Actual result:", "It fails with:"]


def failure_block(log: str, test_id: str) -> str:
    """The --tb=short traceback of one test from a pytest log (pytest heads it with Class.test)."""
    blocks = re.split(r"^_{3,} (.+?) _{3,}$", log.split("short test summary info")[0], flags=re.M)
    head = ".".join(test_id.split("::")[1:])
    pairs = list(zip(blocks[1::2], blocks[2::2]))
    return next((b for h, b in pairs if h == head or h.startswith(head + " ")), pairs[0][1] if pairs else "")


def unittest_failure(
    log: str, test_id: str, workspace: str = "/workspace"
) -> tuple[list[str], tuple[str, int] | None]:
    """(error lines, (test file, line) where it failed) of one test from a `unittest -v` log."""
    name = test_id.rsplit(".", 1)[-1]
    blocks = re.split(r"^={40,}\n(?:FAIL|ERROR): ", log, flags=re.M)
    block = next((b for b in blocks[1:] if b.startswith(f"{name} (") and test_id in b.split("\n", 1)[0]), "")
    block = block.split("\n" + "-" * 40)[1] if "\n" + "-" * 40 in block else block
    frames = re.findall(r'File "(.+?\.py)", line (\d+), in \S+', block)
    frame = next(
        (
            (path.removeprefix(f"{workspace}/"), int(line))
            for path, line in frames
            if is_protected(path.removeprefix(f"{workspace}/"), set())
        ),
        None,
    )
    errors = [
        x for x in block.split("Traceback (most recent call last):")[-1].splitlines() if x and not x.startswith(" ")
    ]
    return errors, frame


def sympy_failure(log: str, test: str, workspace: str = "/workspace") -> tuple[list[str], tuple[str, int] | None]:
    """(error lines, (test file, line) where it failed) of one test (`file::function`) from a SymPy runner's
    verbose log: its block headed `___ file:function ___` (an exception) or `___ file::function ___`."""
    path, name = test.split("::", 1)
    blocks = re.split(r"^_{3,} (\S+?) _{3,}$", log, flags=re.M)
    block = next((b for h, b in zip(blocks[1::2], blocks[2::2]) if h in (f"{path}:{name}", f"{path}::{name}")), "")
    frames = re.findall(r'File "(.+?\.py)", line (\d+), in \S+', block)
    frame = next(
        (
            (p.removeprefix(f"{workspace}/"), int(line))
            for p, line in frames
            if p.removeprefix(f"{workspace}/") == path
        ),
        None,
    )
    errors = [
        x for x in block.split("Traceback (most recent call last):")[-1].splitlines() if x and not x.startswith(" ")
    ]
    return errors, frame


def reproduction(tree: Path, test_file: str, line: int) -> str | None:
    """The failing test function (if long: the failing statement and up to 8 before it), marked where it fails."""
    try:
        source = (tree / test_file).read_text()
        module = ast.parse(source)
    except (OSError, SyntaxError):
        return None
    funcs = [
        n
        for n in ast.walk(module)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= n.end_lineno
    ]
    if not funcs:
        return None
    first, last = funcs[-1].lineno, funcs[-1].end_lineno
    if last - first >= 25:
        blocks = [
            (body, i)
            for n in ast.walk(funcs[-1])
            for f in ("body", "orelse", "finalbody")
            if isinstance(body := getattr(n, f, None), list)
            for i, st in enumerate(body)
            if isinstance(st, ast.stmt) and st.lineno <= line <= st.end_lineno
        ]
        if not blocks:
            return None
        body, i = min(blocks, key=lambda b: b[0][b[1]].end_lineno - b[0][b[1]].lineno)  # the innermost statement
        first, last = body[max(0, i - 8)].lineno, body[i].end_lineno
    lines = source.splitlines()[first - 1 : last]
    lines[line - first] += "  # <- fails here"
    indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
    return "\n".join(x[indent:] for x in lines)


def problem_statement(
    project: Project, m: Mutation, broken: list[str], log: str, tree: Path, rng: random.Random
) -> str:
    test = broken[0]  # Django's and SymPy's as their runner names them (a unittest id, `file::function`)
    if project.runner in ("unittest", "django"):
        raw, frame = unittest_failure(log, test)
    elif project.runner == "sympy":
        raw, frame = sympy_failure(log, test)
    else:
        block = failure_block(log, test)
        raw = [re.sub(r"^E {0,3}", "", x) for x in block.splitlines() if x.startswith("E ")]
        found = next(
            (f for f in re.finditer(r"^(\S+\.py):(\d+): in \S+$", block, re.M) if is_protected(f[1], set())), None
        )
        frame = (found[1], int(found[2])) if found else None
    errors = [re.sub(r"0x[0-9a-fA-F]{6,}", "0x...", x)[:200] for x in raw]
    errors = [
        e
        for n, e in enumerate(errors)
        if e.strip() and e not in errors[:n] and not e.lstrip().startswith(("Use -v", "Full diff"))
    ][:8]
    repro = reproduction(tree, *frame) if frame else None
    first = errors[0] if errors else ""
    exc = first.split(":")[0].strip()
    symptom = (
        "returns a wrong result"
        if first.startswith(("assert", "AssertionError")) or not first
        else f"raises `{exc}`"
        if re.fullmatch(r"[A-Za-z_][\w.]*", exc)
        else "does not behave as documented"
    )
    module = m.path.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    fields = {
        "name": m.function.split(".")[-1],
        "qual": f"{module}.{m.function}",
        "symptom": symptom,
        "path": m.path,
        "project": project.name,
        "version": project.version,
        "test_file": test.split("::")[0] if project.runner == "pytest" else frame[0] if frame else test,
    }
    parts = [rng.choice(TITLES).format(**fields), ""]
    if repro:
        parts += [rng.choice(INTROS).format(**fields), "", "```python", repro, "```", ""]
    else:
        parts += [f"`{fields['qual']}` {symptom}: the check `{test}` of the test suite fails.", ""]
    if errors:
        parts += [rng.choice(OUTCOMES), "", "```", *errors, "```", ""]
    short = (
        (lambda t: t.split("::")[-1].split("[")[0])
        if project.runner in ("pytest", "sympy")
        else (lambda t: t.rsplit(".", 1)[-1])
    )
    others = sorted({short(t) for t in broken[1:]} - {short(test)})
    if others:
        parts.append(
            f"Other tests fail the same way: {', '.join(f'`{o}`' for o in others[:4])}{' and more' if len(others) > 4 else ''}."
        )
    parts.append("The function should behave as its documentation and the rest of the test suite describe.")
    return "\n".join(parts).strip() + "\n"
