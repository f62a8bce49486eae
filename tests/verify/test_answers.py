# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
from prorl_gym.verify.answers import extract_boxed, final_boxed_answer


def test_nested_braces_are_balanced():
    assert extract_boxed(r"so \boxed{\frac{1}{2}} done") == [r"\frac{1}{2}"]


def test_last_single_answer_wins_and_repeats_are_fine():
    assert final_boxed_answer(r"first \boxed{3}, confirmed: \boxed{3}") == ("3", None)


def test_no_box_is_a_format_problem_not_an_answer():
    assert final_boxed_answer("The answer is 12.") == (None, "no_boxed_answer")
    assert final_boxed_answer("") == (None, "no_boxed_answer")


def test_hedging_with_several_different_boxes_is_rejected():
    assert final_boxed_answer(r"\boxed{3} or maybe \boxed{7}") == (None, "multiple_boxed_answers")


def test_empty_and_unbalanced_boxes():
    assert final_boxed_answer(r"\boxed{}") == (None, "empty_boxed_answer")
    assert final_boxed_answer(r"\boxed{1 + {2") == (None, "no_boxed_answer")


def test_huge_output_is_handled():
    text = "x" * 2_000_000 + r"\boxed{42}"
    assert final_boxed_answer(text) == ("42", None)
