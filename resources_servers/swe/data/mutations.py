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
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="ignore"))

    def span(n: ast.AST) -> tuple[int, int]:
        return at(n.lineno, n.col_offset), at(n.end_lineno, n.end_col_offset)

    out: dict[str, Mutation] = {}

    def emit(kind: str, qual: str, node: ast.AST, edits: list[tuple[int, int, str]]) -> None:
        new = text
        for start, end, repl in sorted(edits, reverse=True):
            new = new[:start] + repl + new[end:]
        try:
            compile(new, path, "exec")
        except SyntaxError:
            return
        if new != text:
            out.setdefault(new, Mutation(path, qual, kind, node.lineno, new))

    def swap_op(kind: str, qual: str, node: ast.AST, a: ast.AST, b: ast.AST, pattern: str, repl: str) -> None:
        start, end = span(a)[1], span(b)[0]
        found = re.search(pattern, text[start:end])
        if found:
            emit(kind, qual, node, [(start + found.start(), start + found.end(), repl)])

    for qual, func in functions(ast.parse(text)):
        for default in func.args.defaults + [d for d in func.args.kw_defaults if d]:
            if isinstance(default, ast.Constant) and type(default.value) in (bool, int):
                emit(
                    "change_default",
                    qual,
                    default,
                    [(*span(default), repr(not default.value if type(default.value) is bool else default.value + 1))],
                )
        for node in own_nodes(func):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPS:
                swap_op("flip_comparison", qual, node, node.left, node.comparators[0], *FLIPS[type(node.ops[0])])
            elif isinstance(node, ast.BoolOp):
                old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
                swap_op("swap_bool_op", qual, node, node.values[0], node.values[1], rf"\b{old}\b", new)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                start, end = span(node)
                emit("remove_not", qual, node, [(start, end, re.sub(r"^not\s*", "", text[start:end]))])
            elif isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub):
                if not any(
                    isinstance(o, (ast.JoinedStr, ast.Constant)) and not isinstance(getattr(o, "value", 0), int)
                    for o in (node.left, node.right)
                ):
                    old, new = (r"\+", "-") if isinstance(node.op, ast.Add) else (r"-", "+")
                    swap_op("swap_arith", qual, node, node.left, node.right, old, new)
            elif isinstance(node, (ast.Slice, ast.Subscript, ast.Compare, ast.BinOp)):
                for c in ast.iter_child_nodes(node):
                    if isinstance(c, ast.Constant) and type(c.value) is int and 0 <= c.value <= 16:
                        for value in {c.value + 1, abs(c.value - 1)} - {c.value}:
                            emit("off_by_one", qual, c, [(*span(c), str(value))])
            elif (
                isinstance(node, ast.Call)
                and len(node.args) >= 2
                and not any(isinstance(a, ast.Starred) for a in node.args[:2])
            ):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                (s0, e0), (s1, e1) = span(node.args[0]), span(node.args[1])
                if name not in NOT_SWAPPED and text[s0:e0] != text[s1:e1]:
                    emit("swap_args", qual, node, [(s0, e0, text[s1:e1]), (s1, e1, text[s0:e0])])
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
                    start, end = span(stmt)
                    tail = text[end : starts[stmt.end_lineno]].strip()
                    if not text[starts[stmt.lineno - 1] : start].strip() and (
                        not tail or tail.startswith("#")
                    ):  # whole lines
                        emit(kind, qual, stmt, [(starts[stmt.lineno - 1], starts[stmt.end_lineno], "")])
    return list(out.values())


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
