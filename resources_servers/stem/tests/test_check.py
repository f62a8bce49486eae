# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from prorl_gym.verify.math_check import check_math
from prorl_gym.verify.pool import VerifierError
from resources_servers.stem.check import AnswerSpecError, check_answer, extract_choice, parse_quantity, parse_spec
from resources_servers.stem.symbolic import symbolic_answer, symbolic_gold

G = parse_spec({"kind": "numeric", "value": 9.81, "unit": "m/s^2", "rel_tol": 0.02})
ENERGY = parse_spec({"kind": "numeric", "value": 55.5, "unit": "kJ/mol", "rel_tol": 0.01})
CELSIUS = parse_spec({"kind": "numeric", "value": 23.5, "unit": "°C", "abs_tol": 0.2})
WARMING = parse_spec({"kind": "numeric", "value": 6.0, "unit": "delta_degC", "rel_tol": 0.02})
PERCENT = parse_spec({"kind": "numeric", "value": 29.83, "unit": "%", "rel_tol": 0.01})
COUNT = parse_spec({"kind": "numeric", "value": 512000, "rel_tol": 0.01})
PH = parse_spec({"kind": "numeric", "value": 2.602, "rel_tol": 0, "abs_tol": 0.02})
CHOICE = parse_spec({"kind": "choice", "correct": "B", "options": ["A", "B", "C", "D"]})


def score(answer, spec):
    return check_answer(answer, spec)


@pytest.mark.parametrize(
    "answer,spec",
    [
        ("9.81 m/s^2", G),
        ("9.8 m s^-2", G),
        ("9.81\\,\\mathrm{m\\,s^{-2}}", G),
        ("981 cm/s^2", G),
        ("g = 9.81 m/s²", G),
        ("9.81 \\frac{m}{s^{2}}", G),
        ("0.00981 km/s^2", G),
        ("9.81 m·s⁻²", G),
        ("55.5 kJ/mol", ENERGY),
        ("5.55 \\times 10^{4} J/mol", ENERGY),
        ("13.26 kcal/mol", ENERGY),
        ("5.55e4 J mol^-1", ENERGY),
        ("23.5 °C", CELSIUS),
        ("23.5^\\circ C", CELSIUS),
        ("296.65 K", CELSIUS),
        ("74.3 °F", CELSIUS),
        ("23.5 C", CELSIUS),
        ("6.0 K", WARMING),
        ("6 °C", WARMING),
        ("10.8 °F", WARMING),
        ("29.83%", PERCENT),
        ("29.83 \\%", PERCENT),
        ("29.83", PERCENT),
        ("512000", COUNT),
        ("5.12 \\times 10^5", COUNT),
        ("512,000", COUNT),
        ("512000 cells", COUNT),
        ("2.60", PH),
        ("pH = 2.61", PH),
    ],
)
def test_equivalent_numeric_answers_are_correct(answer, spec):
    result = score(answer, spec)
    assert result["correct"] and result["problem"] is None, result


@pytest.mark.parametrize(
    "answer,spec,problem",
    [
        ("9.0 m/s^2", G, None),  # outside the 2% tolerance
        ("9.81 cm/s^2", G, None),  # the right number in the wrong unit
        ("9.81", G, "missing_unit"),  # kJ or J? a bare number for a dimensioned answer is ambiguous
        ("9.81 m/s", G, "wrong_dimension"),
        ("9.81 N", G, "wrong_dimension"),
        ("9.81 m/s^2 or 9.8 m/s^2", G, "unparseable_unit"),
        ("9.81 m**9**9**9", G, "unparseable_unit"),  # pint would evaluate the exponent tower
        ("9.81 bananas", G, "unparseable_unit"),
        ("9,81 m/s^2", G, "unparseable_unit"),  # decimal comma: refused, not misread
        ("55.5 kJ", ENERGY, "wrong_dimension"),
        ("23.5 K", CELSIUS, None),  # 23.5 K is not 23.5 °C
        ("23.5", CELSIUS, "missing_unit"),
        ("0.2983", PERCENT, None),  # a bare number is read in the spec's unit (%)
        ("512000 m", COUNT, "wrong_dimension"),
        ("", G, "not_a_number"),
        ("about nine", G, "not_a_number"),
        ("inf m/s^2", G, "not_a_number"),
        ("9" * 300 + " m/s^2", G, "answer_too_long"),
        ("1e999 m/s^2", G, "not_a_number"),
    ],
)
def test_wrong_numeric_answers_score_zero(answer, spec, problem):
    result = score(answer, spec)
    assert result["correct"] is False and result["score"] == 0.0 and result["problem"] == problem, result


def test_numbers_are_parsed_without_evaluation():
    assert parse_quantity("-3.0 \\times 10^{8}\\,\\mathrm{m/s}") == (-3.0e8, "m/s")
    assert parse_quantity("10^{-3} M") == (1e-3, "M")
    assert parse_quantity("1.6e-19 C") == (1.6e-19, "C")
    assert parse_quantity("2**10 m") == (2.0, "**10 m")  # no arithmetic: the rest is not a unit
    started = time.perf_counter()
    assert score("1 m^99999999999", G)["problem"] == "unparseable_unit"
    assert score("9" * 199, G)["problem"] == "missing_unit"
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "answer,letter,problem",
    [
        ("B", "B", None),
        ("(B)", "B", None),
        ("b", "B", None),
        ("B.", "B", None),
        ("\\text{B}", "B", None),
        ("\\textbf{(B)}", "B", None),
        ("Option B", "B", None),
        ("The answer is B", "B", None),
        ("B) The total momentum", "B", None),
        ("(B) momentum is conserved", "B", None),
        ("A", "A", None),
        ("A, B", None, "multiple_choices"),
        ("A or B", None, "multiple_choices"),
        ("(A) and (C)", None, "multiple_choices"),
        ("B) not (C)", None, "multiple_choices"),
        ("BD", None, "no_choice_letter"),
        ("E", None, "not_an_option"),
        ("momentum", None, "no_choice_letter"),
        ("", None, "no_choice_letter"),
        ("B" * 500, None, "answer_too_long"),
    ],
)
def test_choice_letters(answer, letter, problem):
    assert extract_choice(answer, CHOICE.options) == (letter, problem)
    assert score(answer, CHOICE)["correct"] is (letter == "B")


@pytest.mark.parametrize(
    "answer,expression,correct",
    [
        ("x^2+1", "x**2+1", True),
        ("x**2 + 1", "x**2+1", True),
        ("(x+1)^2 - 2x", "x**2+1", True),
        ("x^2+2", "x**2+1", False),
        ("2\\pi\\sqrt{m/k}", "2*pi*sqrt(m/k)", True),
        ("2*pi*sqrt(m/k)", "2*pi*sqrt(m/k)", True),
        ("2\\pi\\sqrt{k/m}", "2*pi*sqrt(m/k)", False),
        ("log(2)/k", "\\frac{\\ln 2}{k}", True),
        ("\\sqrt{2GM/R}", "\\sqrt{\\frac{2GM}{R}}", True),
        ("v = \\sqrt{2GM/R}", "\\sqrt{\\frac{2GM}{R}}", True),
        ("(2GM/R)**(1/2)", "\\sqrt{\\frac{2GM}{R}}", True),
        ("\\sqrt{GM/R}", "\\sqrt{\\frac{2GM}{R}}", False),
        ("\\frac{PL^3}{48EI}", "\\frac{P L^{3}}{48 E I}", True),
        ("\\frac{PL^3}{3EI}", "\\frac{P L^{3}}{48 E I}", False),
        ("A_0 \\exp(-kt)", "A_0 e^{-k t}", True),
        ("A_0 e^{kt}", "A_0 e^{-k t}", False),
        ("", "x**2+1", False),
    ],
)
def test_symbolic_answers_through_math_verify(answer, expression, correct):
    spec = parse_spec({"kind": "symbolic", "expression": expression})
    result = check_math(symbolic_answer(answer), symbolic_gold(spec.expression), {"kind": "math_verify"})
    assert result["correct"] is correct, result


def test_python_syntax_becomes_latex():
    assert symbolic_gold("x**2+1") == "x^{2} + 1"
    assert symbolic_gold("\\sqrt{x}") == "\\sqrt{x}"  # LaTeX is kept as written
    assert symbolic_answer("sqrt(2*(x+1))**2 + log(x) + pi") == "\\sqrt{2*(x+1)}^{2} + \\ln(x) + \\pi"
    assert symbolic_answer("x**(n+1)") == "x^{n+1}"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "B",
        {},
        {"kind": "essay"},
        {"kind": "numeric"},
        {"kind": "numeric", "value": "abc"},
        {"kind": "numeric", "value": float("nan")},
        {"kind": "numeric", "value": 0},
        {"kind": "numeric", "value": 1, "rel_tol": 0},  # no usable tolerance
        {"kind": "numeric", "value": 1, "rel_tol": 1.5},
        {"kind": "numeric", "value": 1, "tolerance": 0.1},
        {"kind": "numeric", "value": 1, "unit": "furlongs_per_blob"},
        {"kind": "numeric", "value": 20, "unit": "degC"},
        {"kind": "choice", "correct": "E", "options": ["A", "B"]},
        {"kind": "choice", "correct": "A", "options": ["A", "A"]},
        {"kind": "choice", "correct": "A", "options": ["A"]},
        {"kind": "choice", "correct": "a", "options": ["a", "b"]},
        {"kind": "symbolic", "expression": ""},
        {"kind": "symbolic", "expression": "\\frac{1}{x"},
    ],
)
def test_a_malformed_spec_is_an_error_not_a_score(raw):
    with pytest.raises(AnswerSpecError) as error:
        parse_spec(raw)
    assert isinstance(error.value, VerifierError)  # so the server records an eval_error
    assert "malformed answer spec" in str(error.value)


def test_an_unparseable_python_gold_is_a_spec_error():
    with pytest.raises(AnswerSpecError, match="does not parse"):
        symbolic_gold("x**")


def test_checks_are_thread_safe():
    answers = ["9.81 m/s^2", "981 cm/s^2", "9.81 m/s", "9.81"] * 50
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda a: score(a, G)["correct"], answers))
    assert results == [True, True, False, False] * 50
