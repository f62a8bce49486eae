# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Canaries: what the grader writes into the graded test files, so that the outcome of a test cannot be
decided by what it is called, and so that a run whose outcomes were made up shows it.

- Every graded test is **renamed in place** (its def keeps its line, decorators and body; its name
  becomes words taken from the file's own test names) and runs under that name: code that makes
  tests pass by their names, node ids or a list of them (a hook, a wrapper, a rewritten test, a
  forged report) never meets them. A test the source does not define where its id says (inherited
  from a mixin) is renamed where it is defined (the mixin) when that file is among the sources;
  otherwise it runs under its own name and is listed in `uncovered`.
- **Controls** (controls.py): copies of graded tests with one literal of one equality assertion
  changed, named like the renamed tests and placed at random among the defs of their scope. A control
  cannot pass beside its passing test; one that does says the outcomes were made up or a value lies
  about its equality. Each FAIL_TO_PASS test gets up to CONTROLS_PER_TEST of them (each changing a
  different assertion where it has several), and every other test class (or module) of the run one.

Nothing marks a control or tells it from a graded test but the changed value: no text, no wrapper, no
position (a random def boundary, with its neighbours' blank lines), no name shape. New names never
contain a graded test's name (unless every name does: Django's `test`). Also here: whether a test
carries a static expected-failure marker (pytest's xfail, unittest's expectedFailure) in the graded
source: only such a test may count an expected failure as a pass. The planner reads the graded base's test files only (never a file the
patch could write), and is pure: the grader writes plan.sources to the sandbox.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from resources_servers.swe.controls import plan_controls
from resources_servers.swe.graded_sources import Found, Sources, TestId, uses_of, xfail_marked

FALLBACK_WORDS = (
    "value",
    "result",
    "basic",
    "empty",
    "order",
    "default",
    "simple",
    "update",
    "items",
    "single",
    "nested",
    "repeat",
    "input",
    "output",
    "keys",
    "types",
)
PREFIX = "test_"  # every new name's
MAX_CANDIDATES = 50_000  # names tried for one new name before giving up (the test then keeps its own: uncovered)


@dataclass
class CanaryPlan:
    sources: dict[str, str] = field(default_factory=dict)  # path -> the file with its canaries
    renamed: dict[str, str] = field(default_factory=dict)  # graded id -> the id it runs under
    controls: dict[str, str] = field(default_factory=dict)  # control's id -> the graded id it was made from
    uncovered: list[str] = field(default_factory=list)  # graded ids that run under their own names
    static_xfail: set[str] = field(default_factory=set)  # graded ids marked xfail in the graded source

    def run_id(self, graded: str) -> str:
        return self.renamed.get(graded, graded)

    def run_ids(self, graded: list[str]) -> list[str]:
        """Every id the run asks for: the graded tests (as they run) and the controls."""
        return [*dict.fromkeys(self.run_id(t) for t in graded), *self.controls]


def renamed(line: str, old: str, new: str) -> str:
    """A def line with its function renamed (unchanged if the line does not spell the name as the tree has
    it: identifiers are NFKC-normalised, `def ﬁx` defines `fix`)."""
    return re.sub(rf"\bdef(\s+){re.escape(old)}\b", rf"def\g<1>{new}", line, count=1)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


class _Names:
    """New test names made of words the file's own test names use, unlike any graded name."""

    def __init__(self, src: Sources, graded: set[str], rng: random.Random):
        # A graded name every candidate contains (Django's methods named `test`) tells no name from another:
        # left out, or no candidate would ever do.
        self.rng, self.graded, self.src = rng, {g for g in graded if g not in PREFIX}, src
        self.taken = {w for text in src.text.values() for w in re.findall(r"\w+", text)}
        self.pools: dict[str, list[str]] = {}

    def _pool(self, path: str) -> list[str]:
        if path not in self.pools:
            words = {
                w
                for n in ast.walk(self.src.trees[path])
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
                for w in n.name.split("_")
                if w.isalpha() and len(w) >= 3 and w != "test"
            }
            self.pools[path] = sorted(words if len(words) >= 4 else words | set(FALLBACK_WORDS))
        return self.pools[path]

    def new(self, path: str) -> str:
        pool = self._pool(path)
        for name in itertools.islice(self._candidates(pool), MAX_CANDIDATES):
            if name not in self.taken and not any(g in name for g in self.graded):
                self.taken.add(name)
                return name
        raise ValueError(f"no fresh test name for {path}")

    def _candidates(self, pool: list[str]) -> Iterator[str]:
        """Random draws first (cheap, varied); then every pair and triple in a random order, of the file's
        words and then with the fallback words too: where most of a file's words begin a graded name
        (`test_curry` graded makes every `test_curry_*` unusable), the draws can all miss."""
        for size in (2, 2, 2, 3, 3, 4) * 4:
            yield PREFIX + "_".join(self.rng.sample(pool, min(size, len(pool))))
        for words in (pool, sorted(set(pool) | set(FALLBACK_WORDS))):
            words = self.rng.sample(words, len(words))
            for size in (2, 3):
                for combo in itertools.permutations(words, size):
                    yield PREFIX + "_".join(combo)


def plan_canaries(
    f2p: list[str],
    p2p: list[str],
    sources: dict[str, str],
    parse: Callable[[str], TestId | None],
    format_id: Callable[[TestId], str],
    rng: random.Random | None = None,
) -> CanaryPlan:
    """The canaries of a run of f2p + p2p, written into `sources` (path -> graded text of the test files
    and the test modules they may inherit from). Pure: the grader writes plan.sources to the sandbox."""
    rng = rng or random.Random()
    src, plan = Sources(sources), CanaryPlan()
    graded = list(dict.fromkeys(f2p + p2p))
    parsed = {t: parse(t) for t in graded}
    found = {t: src.locate(tid) for t, tid in parsed.items() if tid is not None}
    plan.static_xfail = {t for t, where in found.items() if where and xfail_marked(src, where)}
    names = _Names(src, {tid.name for tid in parsed.values() if tid}, rng)
    renames = _rename_graded(src, plan, graded, parsed, found, names, format_id)
    _keep_strays(plan, parsed, renames)
    calls = _follow_calls(src, plan, renames, parse)
    make = lambda tid, name: format_id(TestId(tid.file, tid.owners, name, tid.params))  # noqa: E731
    inserts = plan_controls(src.lines, plan, f2p, graded, parsed, found, names.new, make, rng)
    for path in renames.keys() | inserts.keys() | calls.keys():
        plan.sources[path] = _rewritten(src, plan, path, renames.get(path, {}), inserts, calls.get(path, []))
    return plan


def _rename_graded(
    src: Sources,
    plan: CanaryPlan,
    graded: list[str],
    parsed: dict[str, TestId | None],
    found: dict[str, Found | None],
    names: _Names,
    format_id: Callable[[TestId], str],
) -> dict[str, dict[int, tuple[str, str]]]:
    """A new name for the def of each graded test (plan.renamed; plan.uncovered where none can be given):
    path -> line index -> (old name, new name)."""
    renames: dict[str, dict[int, tuple[str, str]]] = {}
    new_names: dict[tuple[str, int], str] = {}  # (path, line of the def) -> its new name
    for t in graded:
        where, tid = found.get(t), parsed.get(t)
        if where is None or tid is None:
            plan.uncovered.append(t)
            continue
        key = (where.path, where.node.lineno)
        if key not in new_names:
            try:
                new_names[key] = names.new(where.path)
            except ValueError:  # no fresh name left (never seen): runs under its own name, reported
                plan.uncovered.append(t)
                continue
            if (
                renamed(src.lines[where.path][where.node.lineno - 1], where.node.name, "x")
                == src.lines[where.path][where.node.lineno - 1]
            ):  # the def line spells the name otherwise (NFKC): it keeps its name
                del new_names[key]
                plan.uncovered.append(t)
                continue
            renames.setdefault(where.path, {})[where.node.lineno - 1] = (where.node.name, new_names[key])
        plan.renamed[t] = format_id(TestId(tid.file, tid.owners, new_names[key], tid.params))
    return renames


def _keep_strays(
    plan: CanaryPlan, parsed: dict[str, TestId | None], renames: dict[str, dict[int, tuple[str, str]]]
) -> None:
    """A def renamed for one id must not leave another id naming it unresolved (imported under another
    name, made by a factory): such defs keep their names, and every id naming them runs as it is."""
    while stray := {parsed[t].name for t in plan.uncovered if parsed.get(t)} & {o for o, _ in _all(renames)}:
        for t in [t for t in plan.renamed if parsed[t].name in stray]:
            del plan.renamed[t]
            plan.uncovered.append(t)
        for path in renames:
            renames[path] = {i: (o, n) for i, (o, n) in renames[path].items() if o not in stray}


def _follow_calls(
    src: Sources,
    plan: CanaryPlan,
    renames: dict[str, dict[int, tuple[str, str]]],
    parse: Callable[[str], TestId | None],
) -> dict[str, list[tuple[int, int, int, str]]]:
    """A renamed test that other code calls by name (`test_helper(...)`, `self.test_x()`) has those calls
    renamed with it, when they are plain loads of a name defined once; otherwise it keeps its name.
    path -> (line index, start, end, new name) of each call to rename."""
    calls: dict[str, list[tuple[int, int, int, str]]] = {}
    for path in list(renames):
        for index, (old, new) in list(renames[path].items()):
            uses = uses_of(src, old)
            if uses is None:
                del renames[path][index]
                for t in [t for t, run in plan.renamed.items() if parse(run).name == new]:
                    del plan.renamed[t]
                    plan.uncovered.append(t)
                continue
            for use_path, line, start, end in uses:
                calls.setdefault(use_path, []).append((line, start, end, new))
    return calls


def _rewritten(
    src: Sources,
    plan: CanaryPlan,
    path: str,
    renames: dict[int, tuple[str, str]],
    inserts: dict[str, dict[int, list[str]]],
    calls: list[tuple[int, int, int, str]],
) -> str:
    """The text of `path` with its calls and defs renamed and its controls inserted (without them, and out
    of plan.controls, when the file would not parse with them)."""
    lines = list(src.lines[path])
    for line, start, end, new in sorted(calls, reverse=True):
        lines[line] = lines[line][:start] + new + lines[line][end:]
    for index, (old, new) in renames.items():
        lines[index] = renamed(lines[index], old, new)
    text = _inserted(lines, inserts.get(path, {}))
    try:
        ast.parse(text)
    except SyntaxError:  # a control that does not fit this file (never seen): the renames alone
        text = _inserted(lines, {})
        gone = {m.group(1) for texts in inserts[path].values() for m in re.finditer(r"\bdef\s+(\w+)", "".join(texts))}
        plan.controls = {c: t for c, t in plan.controls.items() if _name_of(c) not in gone}
    return text


def _name_of(test_id: str) -> str:
    return re.split(r"::|\.", test_id.split("[", 1)[0])[-1]


def _all(renames: dict[str, dict[int, tuple[str, str]]]) -> list[tuple[str, str]]:
    return [pair for per_file in renames.values() for pair in per_file.values()]


def _inserted(lines: list[str], at: dict[int, list[str]]) -> str:
    lines = list(lines)
    if lines:
        lines[-1] = _with_newline(lines[-1])
    for line in sorted(at, reverse=True):  # several scopes may end on one line: the innermost's texts first
        lines[line:line] = sorted(at[line], key=lambda text: -len(_indent(text.lstrip("\n"))))
    return "".join(lines)
