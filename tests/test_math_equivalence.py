"""Math answer equivalence through the verifier's Python API, in the real sandbox."""

from __future__ import annotations

import pytest

from verifiers import registry
from verifiers.base import Verdict, VerifyContext

EQUAL = [
    ("1/2", r"\boxed{\frac{1}{2}}"), ("1/2", r"\boxed{0.5}"), ("1/2", r"\boxed{\dfrac12}"), ("1/2", r"\boxed{2/4}"),
    ("0.5", r"\boxed{1/2}"), ("3", r"\boxed{3}"), ("3", r"\boxed{3.0}"), ("3", "The answer is 3."),
    ("3", r"\boxed{x = 3}"), ("-7", r"\boxed{-7}"), ("-7", r"\boxed{- 7}"), ("1000000", r"\boxed{1,000,000}"),
    ("1000000", r"\boxed{10^6}"), ("1234", r"\boxed{1,234}"), (r"\sqrt{2}", r"\boxed{\sqrt2}"),
    (r"\sqrt{8}", r"\boxed{2\sqrt{2}}"), (r"\frac{\sqrt{3}}{2}", r"\boxed{\frac{1}{2}\sqrt{3}}"),
    (r"\frac{1}{\sqrt{2}}", r"\boxed{\frac{\sqrt{2}}{2}}"), (r"\pi", r"\boxed{\pi}"), (r"2\pi", r"\boxed{2 \pi}"),
    (r"\frac{\pi}{4}", r"\boxed{\pi/4}"), (r"\frac{3\pi}{2}", r"\boxed{1.5\pi}"), ("50", r"\boxed{50\%}"),
    ("50", r"\boxed{50}\%"), ("30", r"\boxed{30^\circ}"), ("30", r"\boxed{30^{\circ}}"),
    ("12", r"\boxed{12 \text{ cm}}"),
    ("12", r"\boxed{12\text{ meters}}"), ("5", r"\boxed{\$5}"), ("5", r"$\boxed{5}$."), ("42", "42"),
    ("42", "Final Answer: 42"), ("42", "so the final answer is $42$."), ("42", "We get 40 then 42"),
    ("x^2+2x+1", r"\boxed{(x+1)^2}"), ("2x+2", r"\boxed{2(x+1)}"), (r"\frac{x}{2}", r"\boxed{x/2}"),
    ("x^2-1", r"\boxed{(x-1)(x+1)}"), (r"\sin^2 x + \cos^2 x", r"\boxed{1}"), ("e^2", r"\boxed{e^{2}}"),
    (r"\ln 8", r"\boxed{3\ln 2}"), (r"\log_2 8", r"\boxed{3}"), ("(1, 2)", r"\boxed{(1,2)}"),
    ("(1, 2)", r"\boxed{\left(1, 2\right)}"), ("(1/2, 3)", r"\boxed{(0.5, 3)}"), (r"\{1, 2\}", r"\boxed{\{2, 1\}}"),
    ("1, 2", r"\boxed{2, 1}"), ("1, 2", r"\boxed{1 \text{ and } 2}"), ("[2, 5)", r"\boxed{[2,5)}"),
    ("(2, 5]", r"\boxed{\left(2, 5\right]}"), (r"(-\infty, 3)", r"\boxed{(-\infty,3)}"),
    (r"[0, \infty)", r"\boxed{[0,\infty)}"),
    (r"(-\infty, 0) \cup (1, \infty)", r"\boxed{(-\infty,0)\cup(1,\infty)}"),
    ("3.14", r"\boxed{\pi}"), ("0.333", r"\boxed{1/3}"), ("1/3", r"\boxed{0.333333333}"), ("2^{10}", r"\boxed{1024}"),
    ("10!", r"\boxed{3628800}"), ("1/2^{99}", r"\boxed{2^{-99}}"), (r"\frac{7}{3}", r"\boxed{2+\frac{1}{3}}"),
    ("i", r"\boxed{i}"), ("2+3i", r"\boxed{3i+2}"), ("yes", r"\boxed{\text{Yes}}"), ("A", r"\boxed{A}"),
    ("0", r"\boxed{0}"), ("0", r"\boxed{-0}"), ("100", r"\boxed{100.00}"), ("6", r"\boxed{3!}"),
    (r"\frac{1}{4}", r"\boxed{\frac14}"), ("4", r"\boxed{\sqrt{16}}"), ("2", r"\boxed{\sqrt[3]{8}}"),
    ("0.1", r"\boxed{\frac{1}{10}}"), ("-\\frac{1}{2}", r"\boxed{-0.5}"), ("5", r"\boxed{5.}"), ("7", r"\boxed{7}."),
    ("ab", r"\boxed{ba}"), ("2a+b", r"\boxed{b+2a}"), (r"\alpha + 1", r"\boxed{1+\alpha}"),
    # A letter after a symbol is a variable, after a plain number a unit (round 15; before, "2\pi k" lost its k).
    (r"\frac{\pi}{3}+2\pi k", r"\boxed{\frac{\pi}{3} + 2k\pi}"), (r"2\pi n", r"\boxed{2n\pi}"),
    ("300", r"\boxed{300 K}"), ("5", r"\boxed{x = 5 m}"), ("3, 4", r"\boxed{3 m, 4 m}"),
    ("0.5", r"\boxed{\frac{1}{2} m}"), (r"5 \text{ million}", r"\boxed{5000 \text{ thousand}}"),
    ("700", r"\boxed{7 \text{ hundred}}"), ("5", r"\boxed{5 \text{ fewer}}"), ("12", r"\boxed{12 \text{ cm squared}}"),
    ("12", r"\boxed{12 \text{ m cubed}}"), ("2", r"\boxed{2 \text{ squared units}}"),
    ("5", r"\boxed{5 \text{ per cent}}"), ("3", r"\boxed{3 \text{ quarters}}"),
    ("3", r"\boxed{3 \text{ repeating digits}}"), ("3n", r"\boxed{3 n}"), ("v/2", r"\boxed{0.5 v}"),
    (r"(-\infty,0)\cup(0,\infty)", r"\boxed{\mathbb{R} \setminus \{0\}}"),
    (r"[0,2)\cup(2,5]", r"\boxed{[0, 5] \setminus \{2\}}"), (r"|x|", r"\boxed{\sqrt{x^2}}"),
    (r"|xy|", r"\boxed{|x| \cdot |y|}"),
    # Round 15: real odd roots, temperatures, sign words.
    ("-2", r"\boxed{\sqrt[3]{-8}}"), (r"-\sqrt[3]{2}", r"\boxed{\sqrt[3]{-2}}"), ("25", r"\boxed{25^\circ\text{C}}"),
    (r"25^\circ \text{C}", r"\boxed{25}"), ("100", "The water boils at $\\boxed{100 ℃}$."),
    ("-5", r"\boxed{\text{minus } 5}"), ("-5", "The answer is negative 5."), ("25", "The answer is not 24 but 25."),
    (r"100^\circ\text{C}", r"\boxed{212^\circ\text{F}}"),
]

NOT_EQUAL = [
    ("1/2", r"\boxed{1/3}"), ("1/2^{98}", r"\boxed{1/2^{99}}"), ("100000000000", r"\boxed{99999999999}"),
    ("[2, 5)", r"\boxed{(2,5)}"), ("(2, 5)", r"\boxed{[2,5]}"), ("25", r"\boxed{2500}"), ("25", r"\boxed{0.25}"),
    ("(1, 2)", r"\boxed{(2, 1)}"), (r"\{1, 2\}", r"\boxed{\{1, 2, 3\}}"), ("1, 2", r"\boxed{1}"), ("3", r"\boxed{-3}"),
    ("3", r"\boxed{3.1}"), ("3.14", r"\boxed{3.15}"), ("1/3", r"\boxed{0.33}"), ("1/3", r"\boxed{0.3}"),
    (r"\sqrt{2}", r"\boxed{1.41}"), ("x^2+1", r"\boxed{x^2-1}"), ("2x", r"\boxed{2y}"), (r"\pi", r"\boxed{3}"),
    ("e", r"\boxed{2.7}"), ("0", r"\boxed{1}"), ("yes", r"\boxed{no}"), ("A", r"\boxed{B}"),
    ("10", r"\boxed{10^{10}}"), ("1", r"\boxed{0.999}"), ("2", r"\boxed{\sqrt{5}}"), ("1000", r"\boxed{1,001}"),
    ("(1, 2)", r"\boxed{(1, 2, 3)}"), ("[0, 1]", r"\boxed{[0, 1)}"), ("5", r"\boxed{50\%}"),
    ("7", "The answer is 8."),
    (r"2\sqrt{3}", r"\boxed{3\sqrt{2}}"), ("x+1", r"\boxed{x}"), (r"\frac{\pi}{2}", r"\boxed{\pi}"),
    ("12", r"\boxed{1/2}"),
    ("1", r"\boxed{i}"), ("10^{-30}", r"\boxed{10^{-29}}"), ("2^{100}", r"\boxed{2^{100}+1}"),
    (r"2\pi k", r"\boxed{2\pi}"), (r"\frac{\pi}{3}+2\pi n", r"\boxed{\frac{\pi}{3}+2\pi}"), ("x+3", r"\boxed{x + 3 n}"),
    (r"x + 3 k", r"\boxed{x+3}"), (r"(-\infty,0)\cup(0,\infty)", r"\boxed{\mathbb{R} \setminus \{1\}}"),
    (r"\mathbb{R}", r"\boxed{\mathbb{R} \setminus \{0\}}"), ("3n", r"\boxed{3 m}"), ("3m", r"\boxed{3 n}"),
    (r"\sqrt{2} t", r"\boxed{\sqrt{2}}"),
    # Positive points alone cannot tell these apart (round 15: "x" was rewarded for "|x|").
    ("|x|", r"\boxed{x}"), ("|xy|", r"\boxed{|x|y}"), ("1", r"\boxed{\frac{x}{|x|}}"),
    (r"\ln|x| + C", r"\boxed{\ln x + C}"), (r"\ln(x^2)", r"\boxed{2\ln x}"), (r"\sqrt{|x|}", r"\boxed{\sqrt{x}}"),
    ("x", r"\boxed{\sqrt{x^2}}"), (r"\sqrt{x^2+2x+1}", r"\boxed{x+1}"),
    ("5", "The answer is negative 5."), ("2", r"\boxed{\sqrt[3]{-8}}"), ("26", r"\boxed{25^\circ\text{C}}"),
    (r"100^\circ\text{C}", r"\boxed{100^\circ\text{F}}"),
    # Two scale words are part of both values (round 15: "5 billion" matched a gold of "5 million").
    (r"5 \text{ million}", r"\boxed{5 \text{ billion}}"), (r"3 \text{ million}", r"\boxed{3 \text{ thousand}}"),
]

# A word after a number that changes its value is no unit to strip (round 15: each of these matched
# the bare number). They are not read as values either, so they get nothing; nor is a denial or a bound.
CHANGED_BY_A_WORD = [
    ("5", r"\boxed{5 \text{ squared}}"), ("5", r"\boxed{5 \text{ cubed}}"), ("3", r"\boxed{3 \text{ halves}}"),
    ("7", r"\boxed{7 \text{ hundredths}}"), ("5", r"\boxed{5 \text{ below zero}}"), ("5", r"\boxed{5 \text{ inverse}}"),
    ("5", r"\boxed{5 \text{ recurring}}"), ("2", r"\boxed{2 \text{ factorial}}"),
    # An answer phrase that denies or bounds names no value (round 15: each was rewarded).
    ("24", "The answer is not 24."), ("24", "The answer is at least 24."), ("24", "**Final answer:** not $24$"),
    ("24", "The answer is between 20 and 24."), ("24", "The answer is less than 24."), ("24", "The total is not 24."),
    ("24", "Checking the constraints, the value lies between 20 and 24."),
]

UNPARSABLE = [r"\boxed{}", r"\boxed{1 +}", r"\boxed{)(}", "I do not know, the answer cannot be determined here at all"]


@pytest.fixture(scope="module")
def math_verifier():
    return registry.get("math")


# Equal where the gold is real: an identity that needs positive values answers a gold that is only
# real for them (ln x + ln y), one way round; not in EQUAL, whose pairs are also judged swapped.
WHERE_THE_GOLD_IS_REAL = [(r"\ln x + \ln y", r"\boxed{\ln(xy)}"), (r"2\ln x", r"\boxed{\ln(x^2)}"),
                          (r"\sqrt{x}\sqrt{y}", r"\boxed{\sqrt{xy}}"), (r"|x|", r"\boxed{\sqrt{x^2}}")]


def _verdict(math_verifier, sandbox, gold: str, response: str):
    task = math_verifier.parse_task({"answer": gold})
    return math_verifier.verify(task, response, VerifyContext(sandbox))


@pytest.mark.parametrize(("gold", "response"), EQUAL + WHERE_THE_GOLD_IS_REAL)
def test_equivalent_answers_are_correct(math_verifier, sandbox, gold, response):
    outcome = _verdict(math_verifier, sandbox, gold, response)
    assert outcome.verdict is Verdict.correct, outcome.evidence


@pytest.mark.parametrize(("gold", "response"), NOT_EQUAL)
def test_different_answers_are_incorrect(math_verifier, sandbox, gold, response):
    outcome = _verdict(math_verifier, sandbox, gold, response)
    assert outcome.verdict is Verdict.incorrect, outcome.evidence


@pytest.mark.parametrize(("gold", "response"), CHANGED_BY_A_WORD)
def test_a_word_that_changes_or_denies_the_value_gets_nothing(math_verifier, sandbox, gold, response):
    task = math_verifier.parse_task({"answer": gold})
    outcome = math_verifier.verify(task, response, VerifyContext(sandbox))
    assert outcome.verdict in (Verdict.invalid_format, Verdict.incorrect), outcome.evidence
    assert outcome.reward(task) == 0.0


@pytest.mark.parametrize("response", UNPARSABLE)
def test_unusable_answers_get_no_reward(math_verifier, sandbox, response):
    task = math_verifier.parse_task({"answer": "1", "last_number_fallback": False})
    outcome = math_verifier.verify(task, response, VerifyContext(sandbox))
    assert outcome.verdict in (Verdict.invalid_format, Verdict.incorrect)
    assert outcome.reward(task) == 0.0


def _boxed_content(response: str) -> str | None:
    if response.startswith("\\boxed{") and response.endswith("}"):
        return response[len("\\boxed{"):-1]
    return None


# Exact pairs (no decimal side, whose precision makes the comparison one-way on purpose).
SYMMETRIC = [(gold, inner) for gold, response in EQUAL
             if (inner := _boxed_content(response)) and "." not in gold + inner and "%" not in inner]


@pytest.mark.parametrize(("gold", "answer"), SYMMETRIC)
def test_exact_equivalence_is_symmetric(math_verifier, sandbox, gold, answer):
    swapped = _verdict(math_verifier, sandbox, answer, rf"\boxed{{{gold}}}")
    assert swapped.verdict is Verdict.correct, swapped.evidence


def test_last_number_fallback_is_configurable(math_verifier, sandbox):
    response = "First we get 12, then after more steps we finally reach 42\nwhich is it"
    on = math_verifier.verify(math_verifier.parse_task({"answer": "42"}), response, VerifyContext(sandbox))
    off_task = math_verifier.parse_task({"answer": "42", "last_number_fallback": False})
    off = math_verifier.verify(off_task, response, VerifyContext(sandbox))
    assert on.verdict is Verdict.correct and on.evidence["extraction"] == "last_number"
    assert off.verdict is Verdict.invalid_format


def test_evidence_explains_the_match(math_verifier, sandbox):
    outcome = _verdict(math_verifier, sandbox, "1/2", r"so \boxed{\dfrac{2}{4}}")
    assert outcome.evidence["extracted"] == r"\dfrac{2}{4}"
    assert outcome.evidence["answer_normalised"] == "1/2"
    assert outcome.evidence["gold_normalised"] == "1/2"
    assert outcome.evidence["how"]
