# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""STEM answer checking: numbers with units (pint), option letters, symbolic expressions.

Model text is never evaluated: numbers are read with a regex and only a unit string that
passed a small grammar (names, * / ( ), exponents up to 12) reaches pint, so numeric and
choice checks are cheap and bounded and run in a server thread. Symbolic equivalence needs
math-verify, which can hang: it runs in the verifier pool as the "math" check (see
resources_servers/stem/symbolic.py); this module only validates its spec.
"""

from __future__ import annotations

import math
import re
import threading
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from prorl_gym.config import StrictConfig
from prorl_gym.verify.pool import VerifierError

MAX_ANSWER_CHARS = 200  # a number with a unit, or a letter; anything longer is not an answer
MAX_UNIT_EXPONENT = 12


class AnswerSpecError(VerifierError, ValueError):
    """The row's answer spec is malformed: an eval error, never a reward of 0."""


class _Spec(StrictConfig):  # a typo ("tolerance") is an error, not a default
    model_config = ConfigDict(frozen=True)


class NumericSpec(_Spec):
    kind: Literal["numeric"]
    value: float
    unit: str | None = None  # None: a pure number
    rel_tol: float = Field(0.01, ge=0, lt=1)
    abs_tol: float = Field(0.0, ge=0)  # in `unit`; needed for values at 0 and for °C/°F

    @model_validator(mode="after")
    def _tolerance(self) -> NumericSpec:
        if not math.isfinite(self.value):
            raise ValueError("value must be finite")
        if self.abs_tol == 0 and (self.rel_tol == 0 or self.value == 0):
            raise ValueError("a zero value or a zero rel_tol needs abs_tol > 0")
        return self


class ChoiceSpec(_Spec):
    kind: Literal["choice"]
    correct: str
    options: list[str] = Field(min_length=2)

    @model_validator(mode="after")
    def _letters(self) -> ChoiceSpec:
        if not all(re.fullmatch(r"[A-Z]", o) for o in self.options) or len(set(self.options)) != len(self.options):
            raise ValueError("options must be distinct capital letters")
        if self.correct not in self.options:
            raise ValueError(f"correct {self.correct!r} is not one of the options")
        return self


class SymbolicSpec(_Spec):
    kind: Literal["symbolic"]
    expression: str = Field(min_length=1, max_length=500)  # LaTeX, or sympy syntax (x**2+1)

    @model_validator(mode="after")
    def _balanced(self) -> SymbolicSpec:
        # math-verify falls back to the raw string for LaTeX it cannot parse, which would score
        # every answer 0; unbalanced brackets are the common case of that, caught here.
        depth = {"{": 0, "(": 0}
        for ch in self.expression:
            if ch in "{(":
                depth[ch] += 1
            elif ch in "})":
                depth["{" if ch == "}" else "("] -= 1
            if min(depth.values()) < 0:
                break
        if any(depth.values()):
            raise ValueError("unbalanced braces or parentheses")
        return self


Spec = Annotated[NumericSpec | ChoiceSpec | SymbolicSpec, Field(discriminator="kind")]
_SPEC: TypeAdapter = TypeAdapter(Spec)


def parse_spec(raw: Any) -> NumericSpec | ChoiceSpec | SymbolicSpec:
    """The validated spec; AnswerSpecError (an eval error) if it is malformed."""
    try:
        spec = _SPEC.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors())
        raise AnswerSpecError(f"malformed answer spec {raw!r}: {problems}") from None
    if isinstance(spec, NumericSpec) and spec.unit:
        units = _parse_units(normalize(spec.unit))
        if units is None:
            raise AnswerSpecError(f"malformed answer spec: unit {spec.unit!r} is not a known unit")
        if str(units) in _DELTA and spec.abs_tol == 0:  # 1% of 20 °C is not a tolerance on temperature
            raise AnswerSpecError(f"malformed answer spec: a value in {spec.unit!r} needs abs_tol")
    return spec


# ------------------------------------------------------------------ text normalisation

_ARG = r"\{((?:[^{}]|\{[^{}]*\})*)\}"  # a brace group, one level of nesting inside
_WRAPPERS = re.compile(r"\\(?:mathrm|text|textrm|textbf|mathbf|mathit|operatorname|mbox|rm)\s*" + _ARG)
_FRAC = re.compile(r"\\[dt]?frac\s*" + _ARG + r"\s*" + _ARG)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_I = re.IGNORECASE
_REPLACEMENTS = [
    (re.compile(r"\\left|\\right|\$"), ""),
    (re.compile(r"\\[,;:! ]|~|\u2009|\u202f"), " "),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree"), "°"),
    (re.compile(r"\\mu\s*|μ"), "µ"),
    (re.compile(r"\\Omega"), "Ω"),
    (re.compile(r"\\AA|\\mathring\s*\{?A\}?"), "Å"),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\\times|×|\\cdot|·|⋅"), "*"),
    (re.compile(r"−|–"), "-"),
    (re.compile(r"\\approx|\\sim|≈"), "="),
    (re.compile(r"[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+"), lambda m: "^" + m[0].translate(_SUPERSCRIPTS)),
    (re.compile(r"(?:°|\bdeg(?:ree)?s?\.?)\s*C(?:elsius)?\b|℃|\bcelsius\b", _I), "degC"),
    (re.compile(r"(?:°|\bdeg(?:ree)?s?\.?)\s*F(?:ahrenheit)?\b|℉|\bfahrenheit\b", _I), "degF"),
    (re.compile(r"°"), " degree"),
    (re.compile(r"[{}]"), ""),
]


def normalize(text: str) -> str:
    """LaTeX and typographic variants to plain text pint and the number regex understand."""
    for _ in range(3):  # nested wrappers: \text{\mathrm{m}}
        text = _WRAPPERS.sub(r"\1", text)
    text = _FRAC.sub(r"(\1)/(\2)", text)
    for pattern, replacement in _REPLACEMENTS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


# ------------------------------------------------------------------ units (pint)

_PINT_LOCK = threading.Lock()  # pint's registry caches are not documented as thread-safe
_TOKEN = re.compile(r"\s*(?:([^\W\d_]\w*)|(\d+(?:\.\d+)?)|(\*\*|[*/()^%-]))")


@lru_cache(maxsize=1)
def _registry():
    import pint

    return pint.UnitRegistry()


def _safe_unit(unit: str) -> bool:
    """A unit pint can parse without arithmetic surprises: numbers only as small exponents
    (pint evaluates `m**9**9**9`) or as the 1 of `1/s`."""
    tokens, pos = [], 0
    while pos < len(unit):
        match = _TOKEN.match(unit, pos)
        if not match or match.end() == pos:
            return False
        tokens.append(match.groups())
        pos = match.end()
    for i, (_, number, _) in enumerate(tokens):
        if number is None:
            continue
        before = [op for _, _, op in tokens[:i] if op not in ("(", "-")][-1:]
        after = tokens[i + 1][2] if i + 1 < len(tokens) else None
        exponent = before in (["^"], ["**"]) and float(number) <= MAX_UNIT_EXPONENT and after not in ("^", "**")
        if not (exponent or (number == "1" and after == "/" and (i == 0 or tokens[i - 1][2] == "("))):
            return False
    return True


def _parse_units(unit: str):
    if len(unit) > 60 or not _safe_unit(unit):
        return None
    with _PINT_LOCK:
        try:
            return _registry().parse_units(unit)
        except Exception:  # noqa: BLE001 - pint raises many types for unknown or odd units
            return None


_DELTA = {"degree_Celsius": "delta_degC", "degree_Fahrenheit": "delta_degF"}  # offset units


# ------------------------------------------------------------------ numeric

_NUMBER = re.compile(
    r"(?P<sign>[-+])?\s*(?:10\s*(?:\^|\*\*)\s*\(?\s*(?P<bare>[-+]?\d{1,3})\s*\)?"
    r"|(?P<mant>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)"
    r"(?:\s*[eE]\s*(?P<e>[-+]?\d{1,3})|\s*(?:\*|x)?\s*10\s*(?:\^|\*\*)\s*\(?\s*(?P<p>[-+]?\d{1,3})\s*\)?)?)"
)


def parse_quantity(answer: str) -> tuple[float, str] | None:
    """(value, unit text) of "9.81 m/s^2", "3.0 \\times 10^{8}\\,\\mathrm{m/s}", "-89 mV", "45%"."""
    text = normalize(answer).rstrip(". ")
    text = text.rsplit("=", 1)[-1].strip()  # "g = 9.81 m/s^2", "E \\approx 2.5 eV"
    match = _NUMBER.match(text)
    if not match:
        return None
    mantissa = match["mant"].replace(",", "") if match["mant"] else "1"
    value = float(f"{mantissa}e{int(match['e'] or match['p'] or match['bare'] or 0)}")  # exact; overflow is inf
    value = -value if match["sign"] == "-" else value
    return (value, text[match.end() :].strip()) if math.isfinite(value) else None


def check_numeric(answer: str, spec: NumericSpec) -> dict[str, Any]:
    if len(answer) > MAX_ANSWER_CHARS:
        return _wrong("answer_too_long")
    parsed = parse_quantity(answer)
    if parsed is None:
        return _wrong("not_a_number")
    value, unit_text = parsed
    result: dict[str, Any] = {"value": value, "unit": unit_text or None}
    target = _parse_units(normalize(spec.unit)) if spec.unit else _registry().dimensionless
    if not unit_text:
        if not target.dimensionless:  # kJ or J? a bare number for a dimensioned answer is ambiguous
            return result | _wrong("missing_unit")
        converted = value  # read in the spec's unit: "45" for a percentage asked in %
    else:
        if str(target.dimensionality) == "[temperature]" and unit_text in ("C", "F"):
            unit_text = "deg" + unit_text  # coulomb and farad are never meant for a temperature
        units = _parse_units(unit_text)
        if units is None and spec.unit is None and re.fullmatch(r"[A-Za-z]+(?: [A-Za-z]+)?", unit_text):
            units = target  # a count's noun ("453 nucleotides"), not a unit
        if units is None:
            return result | _wrong("unparseable_unit")
        if str(units) in _DELTA and str(target).startswith("delta_"):
            units = _parse_units(_DELTA[str(units)])  # a difference was asked: 5 °C of warming is 5 K
        with _PINT_LOCK:
            try:
                converted = _registry().Quantity(value, units).to(target).magnitude
            except Exception:  # noqa: BLE001 - DimensionalityError and offset-unit errors alike
                return result | _wrong("wrong_dimension")
    tolerance = max(spec.rel_tol * abs(spec.value), spec.abs_tol)
    correct = bool(abs(converted - spec.value) <= tolerance)
    return result | {"converted": converted, "correct": correct, "score": float(correct), "problem": None}


# ------------------------------------------------------------------ choice

_CHOICE_PREFIX = re.compile(r"^(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:=]?\s*", re.IGNORECASE)
_MARKED = re.compile(r"\(([A-Z])\)|(?<![A-Za-z])([A-Z])\)")  # "(C)" or "C)" later in the text


def extract_choice(answer: str, options: list[str]) -> tuple[str | None, str | None]:
    """(letter, None) or (None, why not): "B", "(B)", "\\text{B}", "Option B", "B) 3.2 m/s"."""
    if len(answer) > MAX_ANSWER_CHARS:
        return None, "answer_too_long"
    text = _CHOICE_PREFIX.sub("", normalize(answer).strip())
    if single := re.fullmatch(r"\(?\s*([A-Za-z])\s*\)?\s*[.:)]?", text):
        letter = single[1].upper()
    elif lead := re.match(r"\(?([A-Z])\s*[).:]\s+\S", text):
        others = {a or b for a, b in _MARKED.findall(text[lead.end() :])} & set(options)
        if others - {lead[1]}:
            return None, "multiple_choices"
        letter = lead[1]
    else:
        letters = set(re.findall(r"(?<![A-Za-z])([A-Z])(?![A-Za-z])", text)) & set(options)
        if len(letters) != 1:
            return None, "multiple_choices" if letters else "no_choice_letter"
        letter = letters.pop()
    return (letter, None) if letter in options else (None, "not_an_option")


def check_choice(answer: str, spec: ChoiceSpec) -> dict[str, Any]:
    letter, problem = extract_choice(answer, spec.options)
    if letter is None:
        return _wrong(problem)
    return {
        "choice": letter,
        "correct": letter == spec.correct,
        "score": float(letter == spec.correct),
        "problem": None,
    }


def check_answer(answer: str, spec: NumericSpec | ChoiceSpec) -> dict[str, Any]:
    """Numeric or choice check: {"correct", "score", "problem", ...detail}."""
    return check_numeric(answer, spec) if isinstance(spec, NumericSpec) else check_choice(answer, spec)


def _wrong(problem: str | None) -> dict[str, Any]:
    return {"correct": False, "score": 0.0, "problem": problem}
