# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The graded base's test files as the canary planner reads them (canaries.py): parsed once; where a test
id's def is (its class, a class it inherits from, one imported from another test module); whether the
graded source marks it an expected failure; where a name is used besides its def (so a renamed test's
callers are renamed with it, or it keeps its name)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

XFAIL_MARKS = ("xfail", "expectedFailure")


@dataclass(frozen=True)
class TestId:
    """A test id of either runner, split: file, enclosing classes, function name, parameters ("[...]")."""

    file: str
    owners: tuple[str, ...]
    name: str
    params: str = ""

    @property
    def function(self) -> tuple[str, tuple[str, ...], str]:
        return self.file, self.owners, self.name


@dataclass
class Found:
    path: str  # where the test is defined
    scope: ast.Module | ast.ClassDef
    node: ast.FunctionDef | ast.AsyncFunctionDef
    classes: list[ast.ClassDef]  # the classes from the id's owner to the defining one


class Sources:
    def __init__(self, sources: dict[str, str]):
        self.text = sources
        self.lines = {path: text.splitlines(keepends=True) for path, text in sources.items()}
        self.trees: dict[str, ast.Module] = {}
        for path, text in sources.items():
            try:
                self.trees[path] = ast.parse(text)
            except (SyntaxError, ValueError):
                continue
        self._names: NameIndex | None = None
        self._classes_at: dict[int, str] | None = None

    def names(self) -> NameIndex:
        if self._names is None:
            self._names = NameIndex.of(self.trees)
        return self._names

    def path_of(self, cls: ast.ClassDef) -> str | None:
        if self._classes_at is None:
            self._classes_at = {
                id(node): path
                for path, tree in self.trees.items()
                for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef)
            }
        return self._classes_at.get(id(cls))

    def locate(self, test: TestId) -> Found | None:
        tree = self.trees.get(test.file)
        if tree is None:
            return None
        if not test.owners:
            node = _last_def(tree.body, test.name)
            return Found(test.file, tree, node, []) if node else None
        path, cls = test.file, _last_class(tree.body, test.owners[0])
        if cls is None:  # imported into the test module from another one (`from tests.base import TestX`)
            path, cls = next(iter(self._classes(test.owners[0], prefer=test.file)), (path, None))
        for owner in test.owners[1:]:
            cls = _last_class(cls.body, owner) if cls else None
        if cls is None:
            return None
        return self._method(path, cls, test.name, [], depth=0)

    def _method(self, path: str, cls: ast.ClassDef, name: str, seen: list[ast.ClassDef], depth: int) -> Found | None:
        classes = [*seen, cls]
        node = _last_def(cls.body, name)
        if node is not None:
            return Found(path, cls, node, classes)
        if depth > 4:
            return None
        for base in cls.bases:
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            for base_path, base_cls in self._classes(base_name, prefer=path):
                found = self._method(base_path, base_cls, name, classes, depth + 1)
                if found:
                    return found
        return None

    def _classes(self, name: str | None, prefer: str) -> list[tuple[str, ast.ClassDef]]:
        if not name:
            return []
        paths = [prefer, *(p for p in self.trees if p != prefer)]
        return [(p, c) for p in paths if (c := _last_class(self.trees[p].body, name)) is not None]


def _last_def(body: list[ast.stmt], name: str):
    found = None
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return found


def _last_class(body: list[ast.stmt], name: str) -> ast.ClassDef | None:
    found = None
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = node
    return found


def _segment(lines: list[str], node: ast.AST) -> str:
    return "".join(lines[node.lineno - 1 : node.end_lineno])


def xfail_marked(src: Sources, found: Found) -> bool:
    """A static expected-failure marker on the test, its classes or its module (pytestmark)."""
    lines = src.lines[found.path]
    marks = [_segment(lines, d) for d in found.node.decorator_list]
    for cls in found.classes:
        cls_lines = src.lines[src.path_of(cls) or found.path]
        marks += [_segment(cls_lines, d) for d in cls.decorator_list]
        marks += [_segment(cls_lines, n) for n in cls.body if _assigns(n, "pytestmark")]
    module = src.trees[found.path]
    marks += [_segment(lines, n) for n in module.body if _assigns(n, "pytestmark")]
    return any(mark in text for text in marks for mark in XFAIL_MARKS)


def _assigns(node: ast.stmt, name: str) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def uses_of(src: Sources, name: str) -> list[tuple[str, int, int, int]] | None:
    """Where `name` is used besides its def, as (path, line index, start, end) of each load by name or
    attribute; None when a rename could not follow it (defined more than once, assigned, deleted,
    imported, a parameter, a global or nonlocal)."""
    index = src.names()
    if name in index.bound:
        return None
    uses = []
    for path, node in index.loads.get(name, []):
        line = src.lines[path][node.lineno - 1]
        end = len(line.encode()[: node.end_col_offset].decode(errors="replace"))
        if line[end - len(name) : end] != name:  # spelled otherwise in the source (NFKC): cannot follow it
            return None
        uses.append((path, node.lineno - 1, end - len(name), end))
    return None if uses and index.defs.get(name, 0) != 1 else uses


@dataclass
class NameIndex:
    """Every name of the sources, in one walk: how often each is defined, where each is loaded (by name
    or attribute, on one line), and those a rename cannot follow."""

    defs: dict[str, int] = field(default_factory=dict)
    loads: dict[str, list[tuple[str, ast.Name | ast.Attribute]]] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, trees: dict[str, ast.Module]) -> NameIndex:
        index = cls()
        for path, tree in trees.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    index.defs[node.name] = index.defs.get(node.name, 0) + 1
                elif isinstance(node, ast.Name | ast.Attribute):
                    name = node.id if isinstance(node, ast.Name) else node.attr
                    if isinstance(node.ctx, ast.Load) and node.lineno == node.end_lineno:
                        index.loads.setdefault(name, []).append((path, node))
                    else:
                        index.bound.add(name)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    index.bound |= {alias.asname or alias.name for alias in node.names} | {a.name for a in node.names}
                elif isinstance(node, ast.Global | ast.Nonlocal):
                    index.bound |= set(node.names)
                elif isinstance(node, ast.arg):
                    index.bound.add(node.arg)
        return index
