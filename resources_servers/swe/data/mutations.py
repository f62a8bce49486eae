# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Bug injection for data/prepare.py: candidate mutations of function bodies, in a seeded order.

Each mutation is one small, realistic edit of a function body, kept only if the file still
compiles: flipped comparison, and/or swap, dropped `not`, off-by-one constant, +/- swap,
swapped call arguments, changed default, dropped statement or branch. `ordered` interleaves
the kinds round-robin (seeded) so every kind of bug is represented among the tasks.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

FLIPS = {
    ast.Lt: (r"<(?!=)", "<="),
    ast.LtE: (r"<=", "<"),
    ast.Gt: (r">(?!=)", ">="),
    ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.In: (r"\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}
NOT_SWAPPED = {
    "isinstance",
    "issubclass",
    "getattr",
    "setattr",
    "hasattr",
    "print",
    "super",
    "type",
    "range",
    "zip",
    "map",
}
REMOVABLE = {
    ast.Assign: "remove_assign",
    ast.AugAssign: "remove_assign",
    ast.Expr: "remove_call",
    ast.If: "remove_branch",
}


@dataclass(frozen=True)
class Mutation:
    path: str
    function: str  # qualified name inside its module
    kind: str
    line: int
    text: str  # the whole mutated file


def functions(tree: ast.AST, prefix: str = ""):
    """(qualname, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(node, ast.ClassDef):
                yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")


def own_nodes(func: ast.AST):
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        stack += [
            c
            for c in ast.iter_child_nodes(node)
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]


def mutations(path: str, text: str) -> list[Mutation]:
    """Every distinct mutation of the functions in `text` that still compiles."""
    return _Mutator(path, text).all()


class _Mutator:
    """Edits of one source file at AST positions; each rule below yields one kind of bug."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.found: dict[str, Mutation] = {}
        # Node rules, first match wins (a node gets at most one of these kinds).
        self.node_rules = [
            (self._is_flippable, self.flip_comparison),
            (lambda n: isinstance(n, ast.BoolOp), self.swap_bool_op),
            (lambda n: isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not), self.remove_not),
            (lambda n: isinstance(n, ast.BinOp) and type(n.op) in (ast.Add, ast.Sub), self.swap_arith),
            (lambda n: isinstance(n, (ast.Slice, ast.Subscript, ast.Compare, ast.BinOp)), self.off_by_one),
            (self._is_call_with_two_args, self.swap_args),
        ]

    def all(self) -> list[Mutation]:
        for qual, func in functions(ast.parse(self.text)):
            self.change_defaults(qual, func)
            for node in own_nodes(func):
                rule = next((apply for applies, apply in self.node_rules if applies(node)), None)
                if rule is not None:
                    rule(qual, node)
                self.remove_statements(qual, node)
        return list(self.found.values())

    # ---------------------------------------------------------------- positions and edits

    def at(self, line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode(errors="ignore"))

    def span(self, n: ast.AST) -> tuple[int, int]:
        return self.at(n.lineno, n.col_offset), self.at(n.end_lineno, n.end_col_offset)

    def emit(self, kind: str, qual: str, node: ast.AST, edits: list[tuple[int, int, str]]) -> None:
        new = self.text
        for start, end, repl in sorted(edits, reverse=True):
            new = new[:start] + repl + new[end:]
        try:
            compile(new, self.path, "exec")
        except SyntaxError:
            return
        if new != self.text:
            self.found.setdefault(new, Mutation(self.path, qual, kind, node.lineno, new))

    def swap_op(self, kind: str, qual: str, node: ast.AST, a: ast.AST, b: ast.AST, pattern: str, repl: str) -> None:
        """Replace the operator between operands a and b."""
        start, end = self.span(a)[1], self.span(b)[0]
        found = re.search(pattern, self.text[start:end])
        if found:
            self.emit(kind, qual, node, [(start + found.start(), start + found.end(), repl)])

    # ---------------------------------------------------------------- the rules

    def change_defaults(self, qual: str, func: ast.AST) -> None:
        for default in func.args.defaults + [d for d in func.args.kw_defaults if d]:
            if isinstance(default, ast.Constant) and type(default.value) in (bool, int):
                value = not default.value if type(default.value) is bool else default.value + 1
                self.emit("change_default", qual, default, [(*self.span(default), repr(value))])

    @staticmethod
    def _is_flippable(node: ast.AST) -> bool:
        return isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPS

    def flip_comparison(self, qual: str, node: ast.Compare) -> None:
        self.swap_op("flip_comparison", qual, node, node.left, node.comparators[0], *FLIPS[type(node.ops[0])])

    def swap_bool_op(self, qual: str, node: ast.BoolOp) -> None:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        self.swap_op("swap_bool_op", qual, node, node.values[0], node.values[1], rf"\b{old}\b", new)

    def remove_not(self, qual: str, node: ast.UnaryOp) -> None:
        start, end = self.span(node)
        self.emit("remove_not", qual, node, [(start, end, re.sub(r"^not\s*", "", self.text[start:end]))])

    def swap_arith(self, qual: str, node: ast.BinOp) -> None:
        def textual(o: ast.AST) -> bool:  # string arithmetic: + and - do not swap
            return isinstance(o, (ast.JoinedStr, ast.Constant)) and not isinstance(getattr(o, "value", 0), int)

        if not any(textual(o) for o in (node.left, node.right)):
            old, new = (r"\+", "-") if isinstance(node.op, ast.Add) else (r"-", "+")
            self.swap_op("swap_arith", qual, node, node.left, node.right, old, new)

    def off_by_one(self, qual: str, node: ast.AST) -> None:
        for c in ast.iter_child_nodes(node):
            if isinstance(c, ast.Constant) and type(c.value) is int and 0 <= c.value <= 16:
                for value in {c.value + 1, abs(c.value - 1)} - {c.value}:
                    self.emit("off_by_one", qual, c, [(*self.span(c), str(value))])

    @staticmethod
    def _is_call_with_two_args(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        )

    def swap_args(self, qual: str, node: ast.Call) -> None:
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        (s0, e0), (s1, e1) = self.span(node.args[0]), self.span(node.args[1])
        if name not in NOT_SWAPPED and self.text[s0:e0] != self.text[s1:e1]:
            self.emit("swap_args", qual, node, [(s0, e0, self.text[s1:e1]), (s1, e1, self.text[s0:e0])])

    def remove_statements(self, qual: str, node: ast.AST) -> None:
        """Drop one whole-line statement (assignment, call, if without else) of a block of several."""
        for body in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(body, list) or len(body) < 2:
                continue
            for stmt in body:
                kind = REMOVABLE.get(type(stmt))
                if (
                    kind is None
                    or (isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call))
                    or (isinstance(stmt, ast.If) and stmt.orelse)
                ):
                    continue
                start, end = self.span(stmt)
                first, after = self.starts[stmt.lineno - 1], self.starts[stmt.end_lineno]
                tail = self.text[end:after].strip()
                if not self.text[first:start].strip() and (not tail or tail.startswith("#")):
                    self.emit(kind, qual, stmt, [(first, after, "")])


def ordered(candidates: list[Mutation], rng: random.Random) -> list[Mutation]:
    """Seeded order, kinds interleaved round-robin so every kind of bug is represented."""
    kinds: dict[str, list[Mutation]] = {}
    for m in sorted(candidates, key=lambda m: (m.path, m.line, m.kind, m.text)):
        kinds.setdefault(m.kind, []).append(m)
    for group in kinds.values():
        rng.shuffle(group)
    queues = [kinds[k] for k in sorted(kinds)]
    rng.shuffle(queues)
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
