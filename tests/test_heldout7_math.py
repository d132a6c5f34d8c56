"""Held-out math answers, round 7: written blind (from the public docs only, before the
verifier's code was read), labelled as a careful human grader would, in styles earlier
held-out sets did not use: R1/Qwen/DeepSeek-style outputs, units and thousands separators,
multiple choice, intervals and unions, sets, tuples, matrices, percentages, scientific
notation, mixed numbers, complex numbers, degrees, equations, several answers, parameter
ranges, implicit multiplication, numbers in words, trailing text, conflicting answers, the
gold in unusual forms, and wrong answers that look like the right one.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
Cases where the verifier and the blind label still differ after this round are strict
xfails with the reason (docs/math_verifier.md, "Held-out cases left as they are").
"""

from __future__ import annotations

import pytest

from tests.heldout7_support import case_params, check_label, judge_one

T, F = True, False
ABCD = {"A": "3", "B": "5", "C": "7", "D": "9"}

# (task, response, label)
CASES: list[tuple[dict, str, bool]] = [
    # R1 / Qwen / DeepSeek styles
    ({"answer": "42"}, "<think>\nMaybe 40? No: 6 * 7 = 42.\n</think>\n<answer>42</answer>", T),
    ({"answer": "42"}, "<think>So it is 42. Wait, recheck: the count is 24.</think>\n<answer>24</answer>", F),
    ({"answer": "\\frac{3}{4}"}, "<think>3 of 4 parts</think> <answer>0.75</answer>", T),
    ({"answer": "12"}, "<think>4 + 8</think>\n<answer>The answer is 12 apples.</answer>", T),
    ({"answer": "10"}, "<think>the answer is 10</think>\n<answer>\\boxed{11}</answer>", F),
    ({"answer": "17"}, "Adding the two parts gives 17.\n\nTherefore, the final answer is: $\\boxed{17}$. "
                       "I hope it is correct.", T),
    ({"answer": "17"}, "Step 1: 9 + 8 = 17.\n\n**Final Answer**\n\\[\n\\boxed{17}\n\\]", T),
    ({"answer": "17"}, "We add 9 and 8.\n\n**Answer:** 17", T),
    ({"answer": "17"}, "<think>9+8</think>\n<answer></answer>", F),
    # thousands separators, currency, units
    ({"answer": "1,000,000"}, "<answer>1000000</answer>", T),
    ({"answer": "1000000"}, "The total is $1{,}000{,}000$.", T),
    ({"answer": "1000000"}, "The total is $\\boxed{1{,}000{,}001}$.", F),
    ({"answer": "1000000"}, "So we get \\boxed{1\\,000\\,000}.", T),
    ({"answer": "1,234"}, "\\boxed{1234}", T),
    ({"answer": "1234"}, "\\boxed{1,234}", T),
    ({"answer": "2500"}, "She earns \\boxed{\\$2,500}.", T),
    ({"answer": "\\$18.90"}, "The cost is \\boxed{18.9}", T),
    ({"answer": "5 \\text{ cm}"}, "\\boxed{5}", T),
    ({"answer": "5 \\text{ cm}"}, "\\boxed{5\\,\\mathrm{cm}}", T),
    ({"answer": "5 \\text{ cm}"}, "\\boxed{50 \\text{ mm}}", T),
    ({"answer": "5 \\text{ cm}"}, "\\boxed{6 \\text{ cm}}", F),
    # multiple choice
    ({"answer": "C", "choices": ABCD}, "\\boxed{C}", T),
    ({"answer": "C", "choices": ABCD}, "The answer is (C) 7.", T),
    ({"answer": "C", "choices": ABCD}, "\\boxed{7}", T),
    ({"answer": "C", "choices": ABCD}, "\\boxed{B}", F),
    ({"answer": "C", "choices": ABCD}, "\\boxed{5}", F),
    ({"answer": "B"}, "After checking each option, **Answer: B**", T),
    ({"answer": "B"}, "\\boxed{(B)}", T),
    ({"answer": "\\text{(D)}"}, "<think>only D works</think><answer>D</answer>", T),
    ({"answer": "\\text{(D)}"}, "<think>only D works</think><answer>A</answer>", F),
    # intervals, unions, inequalities, parameter ranges
    ({"answer": "(-\\infty, 2] \\cup (5, \\infty)"}, "\\boxed{(-\\infty,2]\\cup(5,+\\infty)}", T),
    ({"answer": "(-\\infty, 2] \\cup (5, \\infty)"}, "\\boxed{(5,\\infty)\\cup(-\\infty,2]}", T),
    ({"answer": "(-\\infty, 2] \\cup (5, \\infty)"}, "\\boxed{(-\\infty, 2) \\cup (5, \\infty)}", F),
    ({"answer": "(-\\infty, 2] \\cup (5, \\infty)"}, "\\boxed{(-\\infty, 2] \\cup [5, \\infty)}", F),
    ({"answer": "[1, 3)"}, "\\boxed{1 \\le x < 3}", T),
    ({"answer": "[1, 3)"}, "\\boxed{1 < x \\le 3}", F),
    ({"answer": "-2 \\le x \\le 3"}, "\\boxed{[-2,3]}", T),
    ({"answer": "k > 4"}, "\\boxed{(4, \\infty)}", T),
    ({"answer": "k > 4"}, "\\boxed{k \\geq 4}", F),
    ({"answer": "(4, \\infty)"}, "The parameter must satisfy \\boxed{k>4}.", T),
    # sets, tuples, ordered pairs, matrices
    ({"answer": "\\{1, 2, 3\\}"}, "\\boxed{\\{3,2,1\\}}", T),
    ({"answer": "\\{1, 2, 3\\}"}, "\\boxed{\\{1,2\\}}", F),
    ({"answer": "\\{-1, 1\\}"}, "\\boxed{\\pm 1}", T),
    ({"answer": "(2, -1)"}, "The intersection point is \\boxed{(2,-1)}.", T),
    ({"answer": "(2, -1)"}, "The intersection point is \\boxed{(-1,2)}.", F),
    ({"answer": "(2, -1)"}, "\\boxed{x=2, y=-1}", T),
    ({"answer": "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}"},
     "\\boxed{\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}}", T),
    ({"answer": "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}"},
     "\\boxed{\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}}", F),
    # percentages vs decimals
    ({"answer": "50\\%"}, "\\boxed{0.5}", T),
    ({"answer": "50\\%"}, "\\boxed{\\frac12}", T),
    ({"answer": "0.35"}, "The probability is \\boxed{35\\%}.", T),
    ({"answer": "0.05"}, "\\boxed{5\\%}", T),
    ({"answer": "5\\%"}, "\\boxed{0.5}", F),
    ({"answer": "25"}, "\\boxed{2500}", F),
    # scientific notation
    ({"answer": "6.02 \\times 10^{23}"}, "\\boxed{6.02e23}", T),
    ({"answer": "6.02 \\times 10^{23}"}, "\\boxed{6.02 \\cdot 10^{23}}", T),
    ({"answer": "6.02 \\times 10^{23}"}, "\\boxed{6.02 \\times 10^{22}}", F),
    ({"answer": "1.2 \\times 10^{-3}"}, "\\boxed{0.0012}", T),
    ({"answer": "1.2 \\times 10^{-3}"}, "\\boxed{0.012}", F),
    ({"answer": "1.5e-3"}, "\\boxed{0.0015}", T),
    # mixed numbers, fractions in unusual forms, similar-looking wrong values
    ({"answer": "2\\frac{1}{2}"}, "\\boxed{5/2}", T),
    ({"answer": "2\\frac{1}{2}"}, "\\boxed{2.5}", T),
    ({"answer": "2\\frac{1}{2}"}, "\\boxed{2\\frac{1}{3}}", F),
    ({"answer": "\\frac{5}{2}"}, "\\boxed{2 \\frac{1}{2}}", T),
    ({"answer": "\\dfrac{1}{2}"}, "so the answer is 0.5", T),
    ({"answer": "\\frac12"}, "\\boxed{1/2}", T),
    ({"answer": "0.5"}, "\\boxed{\\frac{1}{2}}", T),
    ({"answer": "1/2"}, "\\boxed{\\tfrac{2}{4}}", T),
    ({"answer": "\\frac12"}, "\\boxed{\\frac{1}{3}}", F),
    ({"answer": "\\frac{2}{4}"}, "\\boxed{\\frac{2}{3}}", F),
    ({"answer": "\\frac{3}{6}"}, "\\boxed{\\frac{1}{3}}", F),
    ({"answer": "\\frac{7}{2}"}, "\\boxed{3.5}", T),
    ({"answer": "\\frac{7}{2}"}, "\\boxed{3.4}", F),
    ({"answer": "-5"}, "\\boxed{5}", F),
    ({"answer": "100"}, "\\boxed{99}", F),
    ({"answer": "\\frac{1}{2^{99}}"}, "\\boxed{\\frac{1}{2^{98}}}", F),
    ({"answer": "2"}, "\\boxed{2.0}", T),
    # complex numbers
    ({"answer": "3 - 4i"}, "\\boxed{3-4i}", T),
    ({"answer": "3 - 4i"}, "\\boxed{-4i+3}", T),
    ({"answer": "3 - 4i"}, "\\boxed{3+4i}", F),
    ({"answer": "\\frac{1}{2} + \\frac{\\sqrt{3}}{2}i"}, "\\boxed{\\frac{1+i\\sqrt{3}}{2}}", T),
    # degrees
    ({"answer": "90^\\circ"}, "\\boxed{90}", T),
    ({"answer": "45^\\circ"}, "The angle measures 45 degrees.", T),
    ({"answer": "30^\\circ"}, "\\boxed{30°}", T),
    ({"answer": "30^\\circ"}, "\\boxed{60^\\circ}", F),
    # equations vs values, expressions
    ({"answer": "3"}, "\\boxed{x = 3}", T),
    ({"answer": "x = 3"}, "\\boxed{3}", T),
    ({"answer": "y = 2x + 1"}, "\\boxed{y=1+2x}", T),
    ({"answer": "y = 2x + 1"}, "\\boxed{y = 2x - 1}", F),
    ({"answer": "x^2 - 1"}, "\\boxed{(x-1)(x+1)}", T),
    ({"answer": "x^2 - 1"}, "\\boxed{(x-1)^2}", F),
    # several answers
    ({"answer": "x = 2 \\text{ or } x = -3"}, "\\boxed{x=-3 \\text{ or } x=2}", T),
    ({"answer": "x = 2 \\text{ or } x = -3"}, "\\boxed{-3, 2}", T),
    ({"answer": "x = 2 \\text{ or } x = -3"}, "\\boxed{x = 2}", F),
    ({"answer": "x = 2 \\text{ or } x = -3"}, "\\boxed{2, 3}", F),
    ({"answer": "2, -3"}, "The roots are $x = 2$ and $x = -3$, so \\boxed{x=2,\\ x=-3}.", T),
    # implicit multiplication, radicals, constants
    ({"answer": "2\\sqrt{3}"}, "\\boxed{2 \\sqrt 3}", T),
    ({"answer": "2\\sqrt{3}"}, "\\boxed{\\sqrt{12}}", T),
    ({"answer": "2\\sqrt{3}"}, "\\boxed{3\\sqrt{2}}", F),
    ({"answer": "6xy"}, "\\boxed{6yx}", T),
    ({"answer": "\\frac{\\pi}{4}"}, "\\boxed{\\pi/4}", T),
    ({"answer": "\\frac{\\pi}{4}"}, "\\boxed{0.25\\pi}", T),
    ({"answer": "\\sqrt{2}/2"}, "\\boxed{\\frac{1}{\\sqrt{2}}}", T),
    ({"answer": "e^{2}"}, "\\boxed{e^2}", T),
    ({"answer": "\\infty"}, "\\boxed{\\infty}", T),
    ({"answer": "\\infty"}, "\\boxed{-\\infty}", F),
    # numbers in words, trailing text
    ({"answer": "7"}, "There are seven of them, so the answer is seven.", T),
    ({"answer": "7"}, "The answer is seventeen.", F),
    ({"answer": "12"}, "\\boxed{12}. I hope this helps! Let me know if you have questions about 13 or 14.", T),
    ({"answer": "5"}, "The answer is $5$.\n\nCheck: $5 \\cdot 3 = 15$, as required.", T),
    # conflicting answers, answers hidden in the reasoning
    ({"answer": "12"}, "It is \\boxed{12} or maybe \\boxed{13}.", F),
    ({"answer": "5"}, "I think it's \\boxed{5}? Not sure, it could be \\boxed{6}.", F),
    ({"answer": "12"}, "Initially I got \\boxed{13}, but I made an arithmetic slip. Correcting it, the final "
                       "answer is \\boxed{12}.", T),
    ({"answer": "144"}, "We have 12^2 = 144 squares. Adding the border, the final answer is \\boxed{169}.", F),
]

# Blind labels the verifier still disagrees with after this round: index -> why.
DISAGREE: dict[int, str] = {}


@pytest.mark.parametrize("index", case_params(len(CASES), DISAGREE))
def test_heldout7_math(client, index):
    task, response, label = CASES[index]
    check_label(judge_one(client, "math", task, response), label)
