# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Symbolic answers: gold and answer text prepared for the pool's math-verify check.

math-verify reads LaTeX best: its LaTeX parser takes `pi`, `exp(` and `x**2` letter by
letter, and `\\log` is base 10. So a gold expression in sympy syntax is converted with sympy
(rows are trusted data), and an answer in Python syntax gets a few textual rewrites (no
evaluation of model text here; math-verify parses it inside the isolated worker).
"""

from __future__ import annotations

import re
from functools import lru_cache

from resources_servers.stem.check import AnswerSpecError

MAX_SYMBOLIC_CHARS = 1000  # keeps a pathological expression from eating the verify timeout
_PYTHON_SYNTAX = re.compile(r"\*\*|(?<![\\A-Za-z])(?:sqrt|exp|log|ln|sin|cos|tan|pi)\b")
_BARE = r"(?<![\\A-Za-z])"


@lru_cache(maxsize=1024)
def symbolic_gold(expression: str) -> str:
    """The gold expression as LaTeX; AnswerSpecError if sympy syntax does not parse."""
    if not _PYTHON_SYNTAX.search(expression):
        return expression
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    try:
        return sympy.latex(parse_expr(expression, evaluate=False))
    except Exception as exc:  # noqa: BLE001 - SyntaxError, TokenError, TypeError from sympy
        raise AnswerSpecError(f"malformed answer spec: expression {expression!r} does not parse: {exc}") from None


def _close(text: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at `open_at`, or -1."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _braced(text: str, pattern: str, prefix: str) -> str:
    """`<pattern>(body)` -> `<prefix>{body}` for balanced parentheses: sqrt(x+1) -> \\sqrt{x+1}."""
    out, pos = [], 0
    for match in re.finditer(pattern, text):
        if match.start() < pos:
            continue
        end = _close(text, match.end() - 1)
        if end < 0:
            break
        out += [text[pos : match.start()], prefix, "{", _braced(text[match.end() : end], pattern, prefix), "}"]
        pos = end + 1
    return "".join(out) + text[pos:]


def symbolic_answer(answer: str) -> str:
    """Python syntax in an answer as LaTeX: x**2 -> x^{2}, sqrt(..) -> \\sqrt{..}, log -> \\ln, pi -> \\pi."""
    if not _PYTHON_SYNTAX.search(answer):
        return answer
    text = _braced(answer, _BARE + r"sqrt\s*\(", "\\sqrt")
    text = _braced(text, r"\*\*\s*\(", "^")
    text = re.sub(r"\*\*\s*(-?[\w.]+)", r"^{\1}", text)
    text = re.sub(_BARE + r"(?:log|ln)\b", r"\\ln", text)  # Python's log is natural
    return re.sub(_BARE + r"(exp|sin|cos|tan|pi)\b", r"\\\1", text)
