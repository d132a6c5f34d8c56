"""Round 8's held-out math answers, written blind from docs/math_verifier.md and the README.

Each case: (name, task, response, expected verdict). Four blind cases that turned out to repeat
round 7's exactly (a bmatrix for a pmatrix and its transpose, `x = 3` for 3, `\\varnothing` for
`\\emptyset`; all four agreed) were left out here. The expected verdict is what a careful
grader gives from the written contract; where the contract is silent, what a user of a
production reward service expects (noted per case).
"""

from __future__ import annotations

from typing import Any

Case = tuple[str, dict[str, Any], str, str]

# X: incorrect (a wrong answer)
C, X, F = "correct", "incorrect", "invalid_format"

CHOICES = {"A": "2", "B": "4", "C": "6", "D": "8"}

MATH_CASES: list[Case] = [
    # R1-style and answer-only
    ("r1_dfrac", {"answer": "\\frac{3}{4}"}, "<think>3 of 4 parts</think><answer>\\dfrac{3}{4}</answer>", C),
    ("r1_think_answer_differs", {"answer": "18"}, "<think>The answer is 18.</think><answer>17</answer>", X),
    ("r1_think_wrong_then_prose", {"answer": "18"}, "<think>maybe 17? the answer is 17</think>\nThe answer is 18.", C),
    ("r1_tag_with_box", {"answer": "3"}, "<think>x+2=5</think><answer>\\boxed{3}</answer>", C),
    ("r1_tag_slash_fraction", {"answer": "\\frac{1}{2}"}, "<think>half</think>\n<answer>1/2</answer>", C),
    ("r1_long_work", {"answer": "48"}, "<think>15*4 = 60. Then subtract 12: 48.</think>\n<answer>48</answer>", C),
    ("prose_bold_result", {"answer": "48"}, "<think>15*4-12</think>\nThe result is **48**.", C),
    ("answer_phrase_decimal", {"answer": "\\frac12"}, "The answer is 0.5.", C),
    ("answer_line_bold", {"answer": "18"}, "We add the parts.\n\nAnswer: **18**", C),
    ("gsm8k_hashes", {"answer": "18"}, "9 + 9 = 18\n#### 18", C),
    ("final_answer_heading_display_box", {"answer": "5"}, "**Final Answer**\n\n\\[ \\boxed{5} \\]", C),
    ("answer_line_then_check", {"answer": "\\frac13"}, "Answer: 1/3\n\nCheck: 2/6 simplifies to 1/3. Yes.", C),
    ("answer_with_unit_word", {"answer": "4"}, "The answer is 4 apples.", C),
    # fractions, mixed numbers, roots, pi
    ("box_frac12", {"answer": "\\frac{1}{2}"}, "\\boxed{\\frac12}", C),
    ("mixed_number_latex", {"answer": "\\frac{7}{2}"}, "\\boxed{3\\frac{1}{2}}", C),
    ("mixed_number_slash", {"answer": "\\frac{7}{2}"}, "\\boxed{3 1/2}", C),
    ("mixed_number_tfrac", {"answer": "\\frac{9}{4}"}, "\\boxed{2\\tfrac{1}{4}}", C),
    ("negative_mixed_number", {"answer": "-\\frac{9}{4}"}, "\\boxed{-2\\frac14}", C),
    ("sqrt_unsimplified", {"answer": "2\\sqrt{2}"}, "\\boxed{\\sqrt{8}}", C),
    ("sqrt_wrong", {"answer": "2\\sqrt{3}"}, "\\boxed{\\sqrt{6}}", X),
    ("rationalised", {"answer": "\\sqrt{2}/2"}, "\\boxed{\\frac{1}{\\sqrt2}}", C),
    ("pi_decimal_coefficient", {"answer": "\\frac{3\\pi}{4}"}, "\\boxed{0.75\\pi}", C),
    ("pi_unsimplified", {"answer": "\\frac{\\pi}{3}"}, "\\boxed{\\frac{2\\pi}{6}}", C),
    ("unsimplified_gold", {"answer": "\\frac{6}{8}"}, "\\boxed{\\frac34}", C),
    ("unsimplified_answer", {"answer": "\\frac{3}{4}"}, "\\boxed{\\frac{6}{8}}", C),
    ("lowest_terms_required", {"answer": "\\frac34", "form": "lowest_terms"}, "\\boxed{\\frac{6}{8}}", X),
    ("sign_error_fraction", {"answer": "-\\frac{1}{2}"}, "\\boxed{\\frac{1}{2}}", X),
    ("sign_error_phrase", {"answer": "-5"}, "Therefore the answer is $5$.", X),
    ("negative_inline", {"answer": "-5"}, "The answer is $-5$.", C),
    ("power_form", {"answer": "8"}, "\\boxed{2^3}", C),
    ("factorial_form", {"answer": "120"}, "\\boxed{5!}", C),
    ("exp_function", {"answer": "e^{2}"}, "\\boxed{\\exp(2)}", C),
    ("number_word", {"answer": "2"}, "\\boxed{\\text{two}}", C),
    # decimals against exact and decimal golds
    ("decimal_gold_exact_answer", {"answer": "0.333"}, "\\boxed{\\frac13}", C),
    ("two_decimals_for_third", {"answer": "\\frac13"}, "\\boxed{0.33}", X),
    ("four_decimals_for_third", {"answer": "\\frac13"}, "\\boxed{0.3333}", C),
    ("pi_against_decimal_gold", {"answer": "3.14"}, "\\boxed{\\pi}", C),
    ("two_decimals_for_pi", {"answer": "\\pi"}, "\\boxed{3.14}", X),
    ("sqrt2_three_decimals", {"answer": "\\sqrt{2}"}, "\\boxed{1.414}", C),
    ("sqrt2_near_miss", {"answer": "\\sqrt{2}"}, "\\boxed{1.415}", X),
    ("two_thirds_rounded", {"answer": "\\frac{2}{3}"}, "\\boxed{0.667}", C),
    ("two_thirds_short", {"answer": "\\frac{2}{3}"}, "\\boxed{0.67}", X),
    ("integer_as_decimal", {"answer": "7"}, "\\boxed{7.0}", C),
    ("integer_near_miss", {"answer": "7"}, "\\boxed{7.01}", X),
    ("large_near_miss", {"answer": "99999999999"}, "\\boxed{100000000000}", X),
    # scientific notation
    ("sci_to_decimal", {"answer": "1.5 \\times 10^{-3}"}, "\\boxed{0.0015}", C),
    ("sci_wrong_mantissa", {"answer": "3.2\\times 10^{5}"}, "\\boxed{3.3 \\times 10^5}", X),
    ("sci_e_notation", {"answer": "6.02\\times10^{23}"}, "\\boxed{6.02e23}", C),
    ("sci_cdot", {"answer": "1.2 \\times 10^{-3}"}, "\\boxed{1.2 \\cdot 10^{-3}}", C),
    ("power_of_ten", {"answer": "1000000"}, "\\boxed{10^6}", C),
    ("scale_word_million", {"answer": "1000000"}, "\\boxed{1\\text{ million}}", C),
    # percent, currency, units, separators
    ("percent_gold_fraction_answer", {"answer": "25\\%"}, "\\boxed{0.25}", C),
    ("plain_gold_bare_percent_number", {"answer": "0.25"}, "\\boxed{25}", X),
    ("plain_gold_percent_answer", {"answer": "0.25"}, "\\boxed{25\\%}", C),
    ("percent_literal", {"answer": "50"}, "\\boxed{50\\%}", C),
    ("quarter_as_percent", {"answer": "\\frac{1}{4}"}, "\\boxed{25\\%}", C),
    ("currency_trailing_zero", {"answer": "\\$4.50"}, "\\boxed{4.5}", C),
    ("currency_in_prose_last_number", {"answer": "1250"}, "The total cost is \\$1,250.00.", C),
    ("unit_on_answer", {"answer": "12"}, "The length is \\boxed{12\\text{ cm}}", C),
    ("quantity_conversion", {"answer": "2.5 \\text{ km}"}, "\\boxed{2500 \\text{ m}}", C),
    ("thousands_commas", {"answer": "1234567"}, "\\boxed{1,234,567}", C),
    ("thousands_thin_spaces", {"answer": "1234567"}, "\\boxed{1\\,234\\,567}", C),
    # contract silent: two dots cannot be a decimal point, so 1.234.567 is German thousands
    ("thousands_dots_german", {"answer": "1234567"}, "\\boxed{1.234.567}", C),
    # contract silent: Swiss thousands separator
    ("thousands_apostrophe_swiss", {"answer": "1000000"}, "\\boxed{1'000'000}", C),
    ("decimal_comma", {"answer": "2.75"}, "\\boxed{2,75}", C),
    # angles
    ("degree_mark_dropped", {"answer": "72"}, "The final answer is $72^\\circ$.", C),
    ("degrees_for_radians", {"answer": "\\frac{\\pi}{2}"}, "\\boxed{90^\\circ}", C),
    ("bare_number_for_radians", {"answer": "\\frac{\\pi}{2}"}, "\\boxed{90}", X),
    # contract silent: sin of an angle in degrees
    ("sine_of_degrees", {"answer": "\\frac{\\sqrt{3}}{2}"}, "\\boxed{\\sin 60^\\circ}", C),
    # intervals, unions, inequalities, sets, tuples
    ("interval_same", {"answer": "[2,5)"}, "\\boxed{[2,5)}", C),
    ("interval_open_for_halfopen", {"answer": "[2,5)"}, "\\boxed{(2,5)}", X),
    ("union_plus_infty", {"answer": "(-\\infty, -1) \\cup (2, \\infty)"}, "\\boxed{(-\\infty,-1)\\cup(2,+\\infty)}", C),
    ("union_as_or", {"answer": "(-\\infty, -1) \\cup (2, \\infty)"}, "\\boxed{x < -1 \\text{ or } x > 2}", C),
    ("union_closed_end", {"answer": "(-\\infty, -1) \\cup (2, \\infty)"}, "\\boxed{(-\\infty,-1]\\cup(2,\\infty)}", X),
    ("inequality_for_ray", {"answer": "(-\\infty,3]"}, "\\boxed{x \\leq 3}", C),
    ("strict_for_closed_ray", {"answer": "(-\\infty,3]"}, "\\boxed{x<3}", X),
    ("chained_inequality", {"answer": "(1, 2]"}, "\\boxed{1 < x \\leq 2}", C),
    ("closed_vs_halfopen", {"answer": "[0, 1]"}, "\\boxed{[0,1)}", X),
    ("set_reordered", {"answer": "\\{1, 2, 3\\}"}, "\\boxed{\\{3,1,2\\}}", C),
    ("tuple_swapped", {"answer": "(1, 2)"}, "\\boxed{(2, 1)}", X),
    ("tuple_named_inline", {"answer": "(3, -2)"}, "The solution is $(x, y) = (3, -2)$.", C),
    # contract silent: named values for an ordered pair, in the pair's order
    ("tuple_as_named_values", {"answer": "(2, 3)"}, "\\boxed{x=2, y=3}", C),
    ("pm_for_pair_set", {"answer": "\\{-2, 2\\}"}, "\\boxed{\\pm 2}", C),
    ("pm_for_one_value", {"answer": "2"}, "\\boxed{\\pm 2}", F),
    ("empty_set_words", {"answer": "\\emptyset"}, "There is \\boxed{\\text{no solution}}.", C),
    # equations and named values
    ("named_value_sign_error", {"answer": "3"}, "\\boxed{x=-3}", X),
    ("gold_named_answer_plain", {"answer": "x = 3"}, "3", C),
    ("roots_as_or", {"answer": "2, -3"}, "\\boxed{x = -3 \\text{ or } x = 2}", C),
    ("extra_root", {"answer": "2, -3"}, "\\boxed{2, -3, 1}", X),
    ("list_where_one_asked", {"answer": "2"}, "\\boxed{2, -3}", F),
    ("line_rearranged", {"answer": "y = 2x + 1"}, "\\boxed{2x - y + 1 = 0}", C),
    ("expression_reordered", {"answer": "2x+3"}, "\\boxed{3+2x}", C),
    ("expression_factored", {"answer": "x^2-1"}, "\\boxed{(x-1)(x+1)}", C),
    ("expression_wrong_square", {"answer": "x^2+1"}, "\\boxed{(x+1)^2}", X),
    # multiple choice
    ("choice_phrase", {"answer": "C"}, "The correct option is (C).", C),
    ("choice_value_with_choices", {"answer": "C", "choices": CHOICES}, "\\boxed{6}", C),
    ("choice_letter_wrong_value", {"answer": "C", "choices": CHOICES}, "\\boxed{(D) 6}", X),
    ("choice_value_without_choices", {"answer": "B"}, "\\boxed{4}", X),
    # hedges, repeats, truncation
    ("hedge_either_or", {"answer": "4"}, "It's either 3 or 4.", F),
    ("hedge_two_boxes", {"answer": "4"}, "\\boxed{3} or \\boxed{4}", F),
    ("same_answer_twice", {"answer": "24"}, "\\boxed{24} so again \\boxed{24}", C),
    # contract silent: a hedge after an answer phrase ("but it could also be 13")
    ("hedge_after_phrase", {"answer": "12"}, "I think the answer is 12, but it could also be 13.", F),
    # contract silent: a box cut off by the length limit is no answer (12 may have been 125)
    ("truncated_box", {"answer": "12"}, "Adding the terms, the sum is \\boxed{12", F),
]
