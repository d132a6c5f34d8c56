"""Held-out math answers, round 7: written blind (from the public docs only, before the
verifier's code was read), labelled as a careful human grader would, in styles earlier
held-out sets did not use: R1/Qwen/DeepSeek-style outputs, units and thousands separators,
multiple choice, intervals and unions, sets, tuples, matrices, percentages, scientific
notation, mixed numbers, complex numbers, degrees, equations, several answers, parameter
ranges, implicit multiplication, numbers in words, trailing text, conflicting answers, the
gold in unusual forms, and wrong answers that look like the right one.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
Cases where the verifier and the blind label still differ after this round pin the
documented choice, with the reason (docs/math_verifier.md, "Held-out cases left as they are").
"""

from __future__ import annotations

import pytest

from tests.heldout7_support import case_params, check_label, judge_one, pinned

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
    # ---- second blind batch (written after the first scored 109/109, still before reading the code)
    ({"answer": "\\frac{\\sqrt{3}}{3}"}, "\\boxed{\\frac{1}{\\sqrt3}}", T),
    ({"answer": "-\\frac12"}, "\\boxed{\\dfrac{-1}{2}}", T),
    ({"answer": "-\\frac{3}{4}"}, "\\boxed{\\frac{3}{-4}}", T),
    ({"answer": "-\\frac{3}{4}"}, "\\boxed{\\frac{-3}{-4}}", F),
    ({"answer": "-\\frac{3}{4}"}, "\\boxed{-\\frac{-3}{4}}", F),
    ({"answer": "-5"}, "The answer is \u22125.", T),
    ({"answer": "(1, 2)"}, "\\boxed{\\left( 1, 2 \\right)}", T),
    ({"answer": "[1, 2)"}, "\\boxed{\\left[ 1, 2 \\right)}", T),
    ({"answer": "3:2"}, "The ratio is \\boxed{3:2}.", T),
    ({"answer": "3:2"}, "The ratio is \\boxed{2:3}.", F),
    ({"answer": "8 \\text{ km/h}"}, "\\boxed{8\\ \\text{km}/\\text{h}}", T),
    ({"answer": "1000"}, "\\boxed{10^{3}}", T),
    ({"answer": "1000"}, "\\boxed{1e3}", T),
    ({"answer": "123456789012345678901234567890"}, "\\boxed{123456789012345678901234567891}", F),
    ({"answer": "\\log_2 8"}, "\\boxed{3}", T),
    ({"answer": "\\binom{5}{2}"}, "\\boxed{10}", T),
    ({"answer": "5!"}, "\\boxed{120}", T),
    ({"answer": "\\frac{1}{6}"}, "\\boxed{0.1667}", T),
    ({"answer": "0.1667"}, "\\boxed{\\frac{1}{6}}", T),
    ({"answer": "1"}, "\\boxed{1.0000001}", F),
    ({"answer": "0.1"}, "\\boxed{.1}", T),
    ({"answer": "\\frac{1}{3}"}, "\\boxed{0.\\overline{3}}", T),
    ({"answer": "\\frac{1}{3}"}, "\\boxed{0.3}", F),
    ({"answer": "\\frac{a+b}{2}"}, "\\boxed{(a+b)/2}", T),
    ({"answer": "\\frac{a+b}{2}"}, "\\boxed{a+b/2}", F),
    ({"answer": "x^{2}+2x+1"}, "\\boxed{(x+1)^2}", T),
    ({"answer": "y=-\\frac{1}{2}x+3"}, "The line is \\boxed{x + 2y = 6}.", T),
    ({"answer": "2x + 4y = 12"}, "\\boxed{x+2y=6}", T),
    ({"answer": "2x + 4y = 12"}, "\\boxed{x+2y=12}", F),
    ({"answer": "f(x) = 2x"}, "\\boxed{2x}", T),
    ({"answer": "a=2, b=3"}, "\\boxed{b=3, a=2}", T),
    ({"answer": "a=2, b=3"}, "\\boxed{a=3, b=2}", F),
    ({"answer": "2e^{i\\pi/3}"}, "\\boxed{1+\\sqrt3 i}", T),
    ({"answer": "\\begin{pmatrix} \\frac12 & 0 \\\\ 0 & 2 \\end{pmatrix}"},
     "\\boxed{\\begin{pmatrix} 0.5 & 0 \\\\ 0 & 2 \\end{pmatrix}}", T),
    ({"answer": "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}"}, "\\boxed{\\begin{pmatrix}1\\\\-2\\end{pmatrix}}", T),
    ({"answer": "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}"}, "\\boxed{\\begin{pmatrix}-1\\\\2\\end{pmatrix}}", F),
    ({"answer": "C", "choices": ABCD}, "The answer is \\boxed{\\text{(C)}}", T),
    ({"answer": "C", "choices": ABCD}, "Options A, B and D all fail, so the answer is C.", T),
    ({"answer": "C", "choices": ABCD}, "\\boxed{C \\text{ and } D}", F),
    ({"answer": "C"}, "The correct option is C.", T),
    ({"answer": "C"}, "I can rule out C; the answer is A.", F),
    ({"answer": "120"}, "In words: one hundred twenty.", T),
    ({"answer": "\\text{yes}"}, "Yes, it is possible, so the answer is \\boxed{\\text{Yes}}.", T),
    ({"answer": "\\text{yes}"}, "\\boxed{\\text{No}}", F),
    ({"answer": "\\text{even}"}, "Since f(-x) = f(x), the function is \\boxed{\\text{even}}.", T),
    ({"answer": "\\text{even}"}, "\\boxed{\\text{odd}}", F),
    ({"answer": "12.5\\%"}, "\\boxed{\\frac18}", T),
    ({"answer": "12.5\\%"}, "\\boxed{12.5}", T),
    ({"answer": "12.5\\%"}, "\\boxed{0.125\\%}", F),
    ({"answer": "\\frac{1}{8}"}, "\\boxed{12.5\\%}", T),
    ({"answer": "\\frac{\\pi}{6}"}, "\\boxed{30^\\circ}", T),
    ({"answer": "60^\\circ"}, "\\boxed{\\frac{\\pi}{3}}", T),
    ({"answer": "\\frac{\\pi}{6}"}, "\\boxed{30}", F),
    ({"answer": "1.5"}, "\\boxed{\\frac{3}{2}\\text{ hours}}", T),
    ({"answer": "5"}, "\\boxed{5.}", T),
    ({"answer": "5\\%"}, "\\boxed{5}\\%", T),
    ({"answer": "x<0"}, "\\boxed{x \\in (-\\infty, 0)}", T),
    ({"answer": "(-\\infty,2)\\cup(2,\\infty)"}, "\\boxed{x \\neq 2}", T),
    ({"answer": "(-\\infty, \\infty)"}, "\\boxed{\\mathbb{R}}", T),
    ({"answer": "(-\\infty, \\infty)"}, "The inequality holds for all real numbers.", T),
    ({"answer": "\\emptyset"}, "\\boxed{\\varnothing}", T),
    ({"answer": "[2,\\infty)"}, "\\boxed{x \u2265 2}", T),
    ({"answer": "[2,\\infty)"}, "\\boxed{x > 2}", F),
    ({"answer": "12 \\text{ cm}^2"}, "<answer>12</answer>", T),
    ({"answer": "12"}, "<answer>12 cm^2</answer>", T),
    ({"answer": "2^{10}"}, "\\boxed{1024}", T),
    ({"answer": "2^{10}"}, "\\boxed{1023}", F),
    ({"answer": "4"}, "The answer is 4, not 5.", T),
    ({"answer": "4"}, "The answer is not 5; it is 4.", T),
    ({"answer": "5"}, "\\boxed{4} is wrong; the correct answer is \\boxed{5}.", T),
    ({"answer": "4"}, "\\boxed{4} is wrong; the correct answer is \\boxed{5}.", F),
    ({"answer": "4"}, "\\boxed{3}\n\nWait, that's not right. Recounting, the answer is actually 4.", T),
    ({"answer": "3"}, "\\boxed{3}\n\nWait, that's not right. Recounting, the answer is actually 4.", F),
    ({"answer": "4"}, "The answer is between 3 and 5.", F),
    ({"answer": "2, 3"}, "\\boxed{2 \\text{ and } 3}", T),
    ({"answer": "i"}, "\\boxed{\\sqrt{-1}}", T),
]

# Blind labels the verifier still disagrees with after this round: index -> why.
DISAGREE: dict[int, str] = {
    155: "documented choice: a whole response is read whole; 'In words: one hundred twenty' is a label and words, "
         "and a label before a value is not stripped outside an answer phrase (the blind label, reward, is right)",
    173: "documented choice: a prose sentence with no answer phrase ('The inequality holds for all real numbers.') "
         "is not searched for a set written in words (the blind label, reward, is right)",
}

# Regression cases for this round's fixes, written AFTER reading the code (not part of the
# blind score): decimals against exact golds, a retracted box, degrees against radians, and
# "the correct option is".
FIX_CASES: list[tuple[dict, str, bool]] = [
    ({"answer": "1"}, "\\boxed{0.9999999}", F),
    ({"answer": "2/3"}, "\\boxed{0.6666666}", T),
    ({"answer": "2/3"}, "\\boxed{0.6666667}", T),
    ({"answer": "2/3"}, "\\boxed{0.6666668}", F),
    ({"answer": "\\pi"}, "\\boxed{3.1415926}", T),
    ({"answer": "\\pi"}, "\\boxed{3.1415928}", F),
    ({"answer": "3/10"}, "\\boxed{0.30000000000000004}", T),
    ({"answer": "1000000/3"}, "\\boxed{333333.33}", T),
    ({"answer": "1000000/3"}, "\\boxed{333333.34}", F),
    ({"answer": "8"}, "\\boxed{7}. Hmm, that is wrong: I dropped a carry. The answer is 8.", T),
    ({"answer": "7"}, "\\boxed{7}. Hmm, that is wrong: I dropped a carry. The answer is 8.", F),
    ({"answer": "7"}, "\\boxed{7}. Double-checking: 3 + 4 = 7, so the answer is 7.", T),
    ({"answer": "7"}, "\\boxed{7}. Scratch that, I need to recount.", T),
    ({"answer": "7"}, "I made an error in step 1, but the final answer is still \\boxed{7}.", T),
    ({"answer": "5"}, "\\boxed{5}. Beware of an error here: the answer is not -5.", T),
    ({"answer": "5"}, "\\boxed{-5}. That is wrong, the sign flips: the answer is 5.", T),
    ({"answer": "\\pi"}, "\\boxed{180^\\circ}", T),
    ({"answer": "120^\\circ"}, "\\boxed{\\frac{2\\pi}{3}}", T),
    ({"answer": "120^\\circ"}, "\\boxed{\\frac{\\pi}{3}}", F),
    ({"answer": "\\frac{\\pi}{4}"}, "\\boxed{45}", F),
    ({"answer": "45 \\text{ degrees}"}, "\\boxed{\\frac{\\pi}{4}}", T),
    ({"answer": "\\frac{\\pi}{2}"}, "The angle is 90°.", T),
    ({"answer": "90"}, "\\boxed{\\frac{\\pi}{2}}", F),
    ({"answer": "B"}, "The best choice is B.", T),
    ({"answer": "D"}, "The correct choice is (D).", T),
    ({"answer": "D"}, "The correct option is A.", F),
]


@pytest.mark.parametrize("index", case_params(len(CASES), DISAGREE))
def test_heldout7_math(client, index):
    task, response, label = CASES[index]
    check_label(judge_one(client, "math", task, response), pinned(label, index, DISAGREE))


@pytest.mark.parametrize("index", range(len(FIX_CASES)))
def test_heldout7_math_fixes(client, index):
    task, response, label = FIX_CASES[index]
    check_label(judge_one(client, "math", task, response), label)
