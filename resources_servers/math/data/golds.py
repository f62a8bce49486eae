# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Gold answers a checker reads as what they mean, checked when the data is prepared.

A generator may write its gold in a syntax math-verify misreads: reasoning-gym's simple_integration
writes Python (`8*X**8 - 2*X**5/3 + C`), which math-verify parsed to a number taken from inside it, so
`\\boxed{10}` scored 1.0 and the right antiderivative in LaTeX scored 0.0. Every math-verify row is
therefore held to one property before it is written:

- the gold written as a model writes it (LaTeX: sympy's rendering of the gold's meaning) scores 1.0;
- a fragment of it (a number from inside it, a term, one root of several) scores 0.0.

A gold that fails is replaced by its LaTeX rendering when that one passes (the generator's own text
stays on the row as `answer_source`); a row that still fails is checked by its generator's own
checker instead. `model_latex` and `fragments` are also what the data test runs over every row.
"""

from __future__ import annotations

import re

import sympy
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

from prorl_gym.verify.math_check import check_math

TRANSFORMS = (*standard_transformations, implicit_multiplication_application, convert_xor)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _expression(text: str) -> sympy.Expr:
    """The meaning of a gold written in Python or plain maths syntax (LaTeX fractions included)."""
    text = re.sub(r"\\d?frac\{([^{}]+)\}\{([^{}]+)\}", r"(\1)/(\2)", text)
    symbols = {name: sympy.Symbol(name) for name in set(re.findall(r"[A-Za-z]\w*", text))}
    return parse_expr(text, local_dict=symbols, transformations=TRANSFORMS, evaluate=False)


def model_latex(gold: str) -> str:
    """The gold as a model would write it in LaTeX; several comma-separated answers each so."""
    parts = [part.strip() for part in gold.split(",")]
    return ", ".join(_latex(part) for part in parts)


def _latex(part: str) -> str:
    if NUMBER.fullmatch(part) or "\\" in part:  # a number, or LaTeX already
        return part
    constant = part.endswith("+ C")
    expression = _expression(part.removesuffix("+ C").strip() if constant else part)
    return sympy.latex(expression, order="lex") + (" + C" if constant else "")


def fragments(gold: str) -> list[str]:
    """Pieces of the gold that are not the answer: one of several answers, a number from inside a
    longer one, its first term."""
    parts = [part.strip() for part in gold.split(",")]
    if len(parts) > 1:
        return parts[:1]
    numbers = [n for n in NUMBER.findall(gold) if n != gold.strip()]
    out = sorted(set(numbers), key=lambda n: -len(n))[:2]
    terms = re.split(r"(?<=[\w)}])\s*[+-]\s*", gold.removesuffix("+ C").strip())
    if len(terms) > 1:
        out.append(terms[0])
    if gold.strip().startswith("-") and NUMBER.fullmatch(gold.strip()):
        out.append(gold.strip()[1:])  # the sign dropped
    return [f for f in dict.fromkeys(out) if f and f != gold.strip()]


def holds(gold: str) -> bool:
    """The property: the gold's LaTeX form scores 1.0 against it, each of its fragments 0.0."""
    checker = {"kind": "math_verify"}
    try:
        if not check_math(model_latex(gold), gold, checker)["correct"]:
            return False
        return not any(check_math(f, gold, checker)["correct"] for f in fragments(gold))
    except Exception:  # noqa: BLE001 - a gold that does not parse (sympy, math-verify) fails the property
        return False


def checked_gold(gold: str) -> tuple[str, bool]:
    """(the gold to write, whether math-verify can judge it): as it is, or in LaTeX, or neither."""
    if holds(gold):
        return gold, True
    try:
        latex = model_latex(gold)
    except Exception:  # noqa: BLE001 - not parseable as maths: the generator's checker judges it
        return gold, False
    return (latex, True) if holds(latex) else (gold, False)
