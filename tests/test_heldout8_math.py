"""Held-out math answers, round 8: written blind (docs/math_verifier.md and the README only,
before the verifier's code or earlier held-out files were read), labelled with the verdict a
careful grader gives. Blind score 102/107 before the round's fixes, 107/107 after; the 4 that
repeat round 7 exactly (all agreed) are left out, so 98/103 and 103/103 here
(docs/math_verifier.md, "Round 8"). Then regression cases for those fixes, written after.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout8_math_cases import MATH_CASES
from tests.heldout8_support import check_verdict, verdicts_of

# X: incorrect (a wrong answer)
C, X, F = "correct", "incorrect", "invalid_format"

# Written after the blind run, one or more per general fix.
FIX_CASES: list[tuple[str, dict, str, str]] = [
    # a number with two decimal points is never a product of two decimals
    ("two_points_not_a_product", {"answer": "0.699678"}, "\\boxed{1.234.567}", X),
    ("two_points_uneven_groups", {"answer": "1234567"}, "\\boxed{1.234.56}", F),
    ("one_point_stays_decimal", {"answer": "1.234"}, "\\boxed{1.234}", C),
    ("german_thousands_in_answer_tag", {"answer": "2500000"}, "<answer>2.500.000</answer>", C),
    ("german_thousands_wrong_value", {"answer": "2500000"}, "\\boxed{2.500.001}", X),
    ("swiss_typographic_apostrophe", {"answer": "12500"}, "\\boxed{12\u2019500}", C),
    ("swiss_with_decimals", {"answer": "1234.5"}, "\\boxed{1'234.5}", C),
    ("swiss_in_prose_last_number", {"answer": "1000000"}, "The prize was 1'000'000 francs.", C),
    ("german_in_prose_last_number", {"answer": "1234567"}, "The population is 1.234.567.", C),
    ("apostrophes_in_prose_are_not_separators", {"answer": "3"}, "In the 1990's there were 3 of them.", C),
    # degrees inside a trigonometric function are radians * pi / 180
    ("cos_degrees_parenthesised", {"answer": "\\frac{\\sqrt{2}}{2}"}, "\\boxed{\\cos(45^\\circ)}", C),
    ("tan_degree_sign", {"answer": "\\frac{\\sqrt{3}}{3}"}, "\\boxed{\\tan 30°}", C),
    ("squared_sine_degrees", {"answer": "\\frac{3}{4}"}, "\\boxed{\\sin^2 60^\\circ}", C),
    ("pythagorean_identity_degrees", {"answer": "1"}, "\\boxed{\\sin^2 30^\\circ + \\cos^2 30^\\circ}", C),
    ("sine_of_sixty_radians", {"answer": "\\frac{\\sqrt{3}}{2}"}, "\\boxed{\\sin(60)}", X),
    ("sin_degrees_wrong_angle", {"answer": "\\frac{1}{2}"}, "\\boxed{\\sin 60^\\circ}", X),
    ("sin_radians_unchanged", {"answer": "\\sin 1"}, "\\boxed{\\sin(1)}", C),
    ("degrees_outside_trig_unchanged", {"answer": "60"}, "\\boxed{60^\\circ}", C),
    # an alternative offered after the answer phrase is a hedge
    ("hedge_or_possibly", {"answer": "13"}, "The answer is 12 or possibly 13.", F),
    ("hedge_though_possible", {"answer": "12"}, "The answer is 12, though 13 is also possible.", F),
    ("hedge_might_be", {"answer": "12"}, "So the answer is 12, but it might be 14.", F),
    ("denial_still_answers", {"answer": "12"}, "The answer is 12 and not 13.", C),
    ("rewriting_is_not_a_hedge", {"answer": "12"}, "The answer is 12, but it could be written as 24/2.", C),
    ("possibly_same_value", {"answer": "12"}, "The answer is possibly 12.", C),
    ("fallback_hedge_could_also_be", {"answer": "13"}, "It is 12, but it could also be 13.", F),
    ("fallback_hedge_also_possible", {"answer": "13"}, "Total: 12, though 13 is also possible.", F),
    ("fallback_single_value_still_earns", {"answer": "13"}, "Adding them up gives 13.", C),
    ("explanation_names_values", {"answer": "12"}, "The answer is 12, since x can be 4 and y may be 3.", C),
    # a box cut off by the length limit is no answer
    ("cut_box_after_answer", {"answer": "12"}, "So \\boxed{12}. Restating: \\boxed{1", F),
    ("cut_fbox", {"answer": "7"}, "Total: \\fbox{7", F),
    ("closed_box_then_text", {"answer": "12"}, "The sum is \\boxed{12}, as claimed {", C),
    ("cut_inside_tagged_box_is_the_tag", {"answer": "3"}, "<answer>3</answer> and \\boxed{3", C),
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return verdicts_of(client, "math", MATH_CASES + FIX_CASES)


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in MATH_CASES])
def test_heldout8_math(verdicts, name, expected):
    check_verdict(verdicts[name], expected)


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in FIX_CASES])
def test_heldout8_math_fixes(verdicts, name, expected):
    check_verdict(verdicts[name], expected)


def test_a_hedge_after_the_phrase_is_flagged_and_an_honest_answer_still_earns(client):
    hedged, honest = verdicts_of(client, "math", [
        ("hedged", {"answer": "12"}, "I think the answer is 12, but it could also be 13.", F),
        ("honest", {"answer": "12"}, "I think the answer is 12.", C),
    ]).values()
    assert "multiple_answers" in hedged["flags"], hedged
    assert len(hedged["evidence"]["candidates"]) == 2, hedged
    check_verdict(honest, C)


def test_a_box_cut_by_the_length_limit_says_why_and_the_closed_box_still_earns(client):
    cut, closed = verdicts_of(client, "math", [
        ("cut", {"answer": "12"}, "Adding the terms, the sum is \\boxed{12", F),
        ("closed", {"answer": "12"}, "Adding the terms, the sum is \\boxed{12}", C),
    ]).values()
    check_verdict(cut, F)
    assert cut["evidence"]["extraction"] == "unclosed_box", cut
    assert "left open" in cut["evidence"]["reason"], cut
    check_verdict(closed, C)
