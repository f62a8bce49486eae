# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Math answer checking; runs inside a verifier worker process (imports are heavy).

Two checkers, chosen per row by the dataset: `math_verify` (symbolic/numeric
equivalence, the default) and `reasoning_gym` (the generator's own score_answer, for
answers with a generator-specific format or tolerance: complex numbers written with i,
decimals to N significant digits, factor lists).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def warm_up() -> None:
    """Import what checks use now (seconds), not on a rollout's clock (the verifier worker calls it)."""
    import math_verify  # noqa: F401
    import reasoning_gym  # noqa: F401


# Some generator checkers give shaped partial credit (complex_arithmetic: exp(-distance));
# the environment's reward is binary, the raw score stays on the record.
CORRECT_AT = 0.99
CLOSED_FORM_SECONDS = 3


def check_math(answer: str, expected: str, checker: dict[str, Any]) -> dict[str, Any]:
    """{"correct": bool, "score": raw checker score, ...detail}."""
    kind = checker.get("kind", "math_verify")
    if kind == "math_verify":
        result = _math_verify(answer, expected)
    elif kind == "reasoning_gym":
        result = _reasoning_gym(answer, checker)
    else:
        raise ValueError(f"unknown math checker kind {kind!r}")
    return result | {"correct": result["score"] >= CORRECT_AT}


def _math_verify(answer: str, expected: str) -> dict[str, Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    gold = parse(f"${expected}$", extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()])
    if not gold or all(isinstance(item, str) for item in gold):  # math-verify would fall back to string equality
        raise ValueError(f"expected answer {expected!r} does not parse")
    predicted = parse(f"\\boxed{{{answer}}}")
    correct = bool(predicted) and bool(verify(gold, predicted))
    result = {"score": 1.0 if correct else 0.0, "parsed": [str(p) for p in predicted[:1]]}
    if not correct and predicted and _closed_forms_equal(gold[0], predicted[0]):
        result |= {"score": 1.0, "proof": "closed_form"}  # an identity math-verify did not find
    return result


def _closed_forms_equal(a: Any, b: Any, seconds: int = CLOSED_FORM_SECONDS) -> bool:
    """Prove a == b for two exact closed-form numbers (no symbols, no floats): their difference
    simplifies to 0, or its minimal polynomial is x (an exact algebraic proof, e.g. sums and
    products of cosines of rational multiples of pi). Bounded in time (SIGALRM: the verifier
    worker runs checks on its main thread); anything unproven stays not equal, so this adds no
    false positives."""
    import signal

    import sympy

    if not all(isinstance(x, sympy.Expr) and x.is_number and not x.has(sympy.Float) for x in (a, b)):
        return False

    def stop(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        difference = (a - b).doit()  # sums and products written out
        if sympy.simplify(difference) == 0:
            return True
        return sympy.minimal_polynomial(difference, sympy.Symbol("x")) == sympy.Symbol("x")
    except Exception:  # noqa: BLE001 - not algebraic, too slow, unsupported: not proven, so not equal
        return False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@lru_cache(maxsize=64)
def _dataset(name: str):
    import reasoning_gym

    return reasoning_gym.create_dataset(name, size=1, seed=0)


def _reasoning_gym(answer: str, checker: dict[str, Any]) -> dict[str, Any]:
    dataset = _dataset(checker["dataset"])  # an unknown generator name is a real eval error
    try:
        score = float(dataset.score_answer(answer, checker["entry"]))
    except Exception as exc:  # noqa: BLE001 - the generator's parser rejects this answer text
        return {"score": 0.0, "answer_rejected": f"{type(exc).__name__}: {exc}"[:300]}
    return {"score": score}
