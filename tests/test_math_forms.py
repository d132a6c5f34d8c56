"""Answer forms, hedges, missing answers and task options of the math verifier, through its
Python API in the real sandbox (one HTTP test checks the flag reaches the trainer)."""

from __future__ import annotations

import pytest

from service.testing.app import AppServer
from verifiers import registry
from verifiers.base import Verdict, VerifyContext

# (form, gold, response): each form has equal pairs here and unequal pairs below.
EQUAL = [
    ("matrix", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\boxed{\begin{bmatrix}1 & 2\\ 3 & 4\end{bmatrix}}"),
    ("matrix", r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", r"$\begin{pmatrix}1&0\\0&1\end{pmatrix}^2$"),
    ("vector", r"\begin{pmatrix}1\\-2\end{pmatrix}", r"\boxed{(1,-2)}"),
    ("vector", r"\begin{pmatrix}\frac12\\3\end{pmatrix}", r"\boxed{\begin{pmatrix}0.5\\3\end{pmatrix}}"),
    ("inequality", r"(-\infty, 3]", r"\boxed{x \le 3}"),
    ("reversed inequality", r"(-\infty, 3]", r"\boxed{3 \geq x}"),
    ("chained inequality", "[-2, 7]", r"\boxed{-2 \le x \le 7}"),
    ("inequality vs inequality", r"x < 1", r"\boxed{-x > -1}"),
    ("union", r"(-\infty,0)\cup(1,\infty)", r"\boxed{x<0 \text{ or } x>1}"),
    ("union", r"[0,1)\cup[1,2]", r"\boxed{[0,2]}"),
    ("membership", "(2, 5]", r"\boxed{x \in (2, 5]}"),
    ("set-builder", r"\{x \mid x > 3\}", r"\boxed{(3, \infty)}"),
    ("not equal", r"x \neq 3", r"\boxed{(-\infty,3)\cup(3,\infty)}"),
    ("pm", r"1 \pm \sqrt{2}", r"\boxed{1-\sqrt2, 1+\sqrt2}"),
    ("pm", r"\{1-\sqrt2, 1+\sqrt2\}", r"\boxed{1 \pm \sqrt{2}}"),
    ("empty set", r"\emptyset", r"There is \boxed{\text{no solution}}."),
    ("empty set", r"\varnothing", r"\boxed{\{\}}"),
    ("infinity", r"\infty", r"\boxed{+\infty}"),
    ("all reals", r"(-\infty, \infty)", r"\boxed{\mathbb{R}}"),
    ("equation", "2x+4y=12", r"\boxed{x+2y=6}"),
    ("equation", r"y = 2x + 1", r"\boxed{2x - y + 1 = 0}"),
    ("named value", "x = 3", r"\boxed{3}"),
    ("named value", "3", r"\boxed{k = 3}"),
    ("system", "x = 1, y = 2", r"\boxed{y = 2, x = 1}"),
    ("ratio", "3:4", r"\boxed{6:8}"),
    ("mixed number", "13/4", r"\boxed{3\frac14}"),
    ("mixed number", r"-\frac{13}{4}", r"\boxed{-3\frac{1}{4}}"),
    ("thousands", "1000000", r"\boxed{1{,}000{,}000}"),
    ("thousands", "12000", r"\boxed{12\,000}"),
    ("decimal comma", "12.5", r"\boxed{12,5}"),
    ("percent either", r"50\%", r"\boxed{0.5}"),
    ("percent either", r"50\%", r"\boxed{50}"),
    ("units", "12", r"\boxed{12 \text{ cm}^2}"),
    ("units", "125", r"The distance is $\boxed{125\textnormal{ miles}}$."),
    ("currency", "5", r"\boxed{\$5.00}"),
    ("degrees", "30", r"\boxed{30^\circ}"),
    ("number words", "21", r"\boxed{\text{twenty-one}}"),
    ("binom", "10", r"\boxed{\dbinom{5}{2}}"),
    ("cfrac", "1/3", r"\boxed{\cfrac{1}{3}}"),
    ("base subscript", "204_5", r"\boxed{204_{5}}"),
    ("complex", "2+3i", r"\boxed{3i+2}"),
    ("scientific", "1500", r"\boxed{1.5 \times 10^3}"),
    ("scientific", "0.0015", r"\boxed{1.5e-3}"),
    ("minerva", "42", "So 6 times 7.\nFinal Answer: The final answer is $42$. I hope it is correct."),
    ("gsm8k", "42", "6 * 7 = 42\n#### 42"),
    ("display math", "42", r"We get \[ 42 \]"),
    ("repeat that agrees", "4", r"\boxed{4}, that is \boxed{4.0}"),
    ("several values asked", "1, 2", r"\boxed{1} and \boxed{2}"),
    ("several values asked", r"\{1, 2\}", r"\boxed{2, 1}"),
    ("choice letter", r"\text{(E)}", r"\boxed{E}"),
    ("answer line", "6", "So the total is 6.\n\n**Answer:** 6"),
    ("answer line", "2", "Solving gives it.\n\n**Final answer:** $x=2$"),
    ("answer line", "6", "Answer: 6"),
    ("answer line", "6", "Adding them.\n\n**Final Answer**: $6$"),
    ("answer line", r"\frac12", "Half of it.\n*Answer:* **1/2**"),
    ("latex units", r"8\text{ cm}^2", r"\boxed{8 \mathrm{~cm}^2}"),
    ("latex units", "8", r"\boxed{8\,\text{m}}"),
    ("latex units", "8", r"\boxed{8\operatorname{kg}}"),
    ("latex units", "8", r"$8\hspace{1mm}\mathrm{cm}^{2}$"),
    ("base against its decimal value", "1011_2", r"\boxed{11}"),
    ("base against its decimal value", "13", r"\boxed{1101_2}"),
    ("base subscript", "10101_2", r"\boxed{10101_2}"),
]

NOT_EQUAL = [
    ("matrix", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\boxed{\begin{pmatrix}1&2\\3&5\end{pmatrix}}"),
    ("matrix", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\boxed{\begin{pmatrix}1&3\\2&4\end{pmatrix}}"),
    ("vector", r"\begin{pmatrix}1\\-2\end{pmatrix}", r"\boxed{(-2,1)}"),
    ("inequality", r"(-\infty, 3]", r"\boxed{x < 3}"),
    ("reversed inequality", r"(-\infty, 3]", r"\boxed{3 \le x}"),
    ("chained inequality", "[-2, 7]", r"\boxed{-2 < x \le 7}"),
    ("union", r"(-\infty,0)\cup(1,\infty)", r"\boxed{(-\infty,0]\cup(1,\infty)}"),
    ("set-builder", r"\{x \mid x > 3\}", r"\boxed{[3, \infty)}"),
    ("pm", r"1 \pm \sqrt{2}", r"\boxed{1+\sqrt2, 1+\sqrt3}"),
    ("empty set", r"\emptyset", r"\boxed{0}"),
    ("infinity", r"\infty", r"\boxed{-\infty}"),
    ("equation", "2x+4y=12", r"\boxed{x+2y=7}"),
    ("equation", "2x+4y=12", r"\boxed{x+4y=12}"),
    ("named value", "x = 3", r"\boxed{4}"),
    ("equation is not its constant", "2x + z = 1", r"\boxed{1}"),
    ("system", "x = 1, y = 2", r"\boxed{x = 2, y = 1}"),
    ("ratio", "3:4", r"\boxed{4:3}"),
    ("mixed number is not a product", "3/4", r"\boxed{3\frac14}"),
    ("thousands", "1000", r"\boxed{1\,001}"),
    ("percent", r"50\%", r"\boxed{5}"),
    ("percent written nowhere", "0.28", r"\boxed{28}"),
    ("units are not numbers", "12", r"\boxed{13 \text{ cm}}"),
    ("number words", "21", r"\boxed{\text{twenty-two}}"),
    ("binom", "10", r"\boxed{\binom{5}{3}+1}"),
    ("base subscript", "204_5", r"\boxed{204_6}"),
    ("complex", "2+3i", r"\boxed{2-3i}"),
    ("scientific", "1500", r"\boxed{1.5 \times 10^4}"),
    ("minerva", "42", "Final Answer: The final answer is $41$. I hope it is correct."),
    ("gsm8k", "42", "#### 43"),
    ("choice letter", r"\text{(E)}", r"\boxed{D}"),
    ("answer line", "6", "So the total is 6.\n\n**Answer:** 7"),
    ("answer line", "2", "Solving gives it.\n\n**Final answer:** $x=3$"),
    ("answer line", "6", "We had 6 before.\nFinal Answer: 5"),
    ("latex units", r"8\text{ cm}^2", r"\boxed{9 \mathrm{~cm}^2}"),
    ("latex units", "8", r"\boxed{8.5\,\text{m}}"),
    ("base against its decimal value", "1101_2", r"\boxed{11}"),
    ("base against its decimal value", "1011_2", r"\boxed{1011}"),
    ("base against its decimal value", "204_5", r"\boxed{204}"),
]

# Hedges: several different final answers where one value is asked.
HEDGES = [
    ("4", r"\boxed{3} or \boxed{4}"),
    ("4", r"\boxed{3}\boxed{4}"),
    ("4", r"\boxed{3 \text{ or } 4}"),
    ("4", r"\boxed{3, 4}"),
    ("4", r"The answer is $3$ or $4$."),
    ("4", r"\boxed{\pm 4}"),
    ("2", r"\boxed{x = 2 \text{ or } x = -2}"),
    ("4", r"First \boxed{4}. On reflection \boxed{5}."),
    ("32349", r"\boxed{32, 349}"),  # a list, not a thousands separator
    ("4", "Two cases.\n\n**Answer:** $3$ or $4$"),
    ("4", "**Final Answer:** 3 or 4"),
]

NO_ANSWER = ["no idea", "I don't know the answer to this question, sorry.", r"\boxed{banana}",
             "We tried several approaches but none of them led anywhere useful in the end."]


@pytest.fixture(scope="module")
def math_verifier():
    return registry.get("math")


def _verify(math_verifier, sandbox, gold: str, response: str, **options):
    task = math_verifier.parse_task({"answer": gold, **options})
    return task, math_verifier.verify(task, response, VerifyContext(sandbox))


def test_every_form_has_equal_and_unequal_pairs():
    equal_forms = {form for form, _, _ in EQUAL}
    unequal_forms = {form for form, _, _ in NOT_EQUAL}
    for form in ("matrix", "vector", "inequality", "chained inequality", "union", "pm", "empty set", "equation",
                 "named value", "ratio", "thousands", "percent either", "number words", "binom", "base subscript",
                 "complex", "scientific", "minerva", "gsm8k", "infinity", "set-builder", "system", "answer line",
                 "latex units", "base against its decimal value"):
        assert form in equal_forms, form
        assert form in unequal_forms or form.replace(" either", "") in unequal_forms, form


@pytest.mark.parametrize(("form", "gold", "response"), EQUAL)
def test_equal_forms_are_correct(math_verifier, sandbox, form, gold, response):
    task, outcome = _verify(math_verifier, sandbox, gold, response)
    assert outcome.verdict is Verdict.correct, (form, outcome.evidence)
    assert outcome.reward(task) == 1.0


@pytest.mark.parametrize(("form", "gold", "response"), NOT_EQUAL)
def test_unequal_forms_are_incorrect(math_verifier, sandbox, form, gold, response):
    task, outcome = _verify(math_verifier, sandbox, gold, response)
    assert outcome.verdict is Verdict.incorrect, (form, outcome.evidence)
    assert outcome.reward(task) == 0.0


@pytest.mark.parametrize(("gold", "response"), HEDGES)
def test_hedges_fail_the_format_gate_then_an_honest_answer_is_rewarded(math_verifier, sandbox, gold, response):
    task, outcome = _verify(math_verifier, sandbox, gold, response)
    assert outcome.verdict is Verdict.invalid_format, outcome.evidence
    assert "multiple_answers" in outcome.flags
    assert len(outcome.evidence["candidates"]) >= 2
    assert outcome.reward(task) == 0.0
    honest = math_verifier.verify(task, rf"So the answer is $\boxed{{{gold}}}$.", VerifyContext(sandbox))
    assert honest.verdict is Verdict.correct and honest.reward(task) == 1.0


@pytest.mark.parametrize("response", NO_ANSWER)
def test_prose_without_an_answer_is_invalid_format(math_verifier, sandbox, response):
    task, outcome = _verify(math_verifier, sandbox, "4", response, last_number_fallback=False)
    assert outcome.verdict is Verdict.invalid_format, outcome.evidence
    assert outcome.reward(task) == 0.0


def test_a_task_that_asks_for_several_values_compares_them_as_a_set(math_verifier, sandbox):
    _, one = _verify(math_verifier, sandbox, "4", r"\boxed{3, 4}", several_answers=True)
    assert one.verdict is Verdict.incorrect and "multiple_answers" not in one.flags
    _, both = _verify(math_verifier, sandbox, "3, 4", r"\boxed{4} and \boxed{3}")
    assert both.verdict is Verdict.correct


def test_percent_policy_is_per_task(math_verifier, sandbox):
    verdicts = {policy: (_verify(math_verifier, sandbox, r"50\%", r"\boxed{0.5}", percent=policy)[1].verdict,
                         _verify(math_verifier, sandbox, r"50\%", r"\boxed{50}", percent=policy)[1].verdict)
                for policy in ("literal", "fraction", "either")}
    assert verdicts == {"literal": (Verdict.incorrect, Verdict.correct),
                        "fraction": (Verdict.correct, Verdict.incorrect),
                        "either": (Verdict.correct, Verdict.correct)}


def test_named_values_can_be_turned_off(math_verifier, sandbox):
    assert _verify(math_verifier, sandbox, "3", r"\boxed{x = 3}")[1].verdict is Verdict.correct
    off = _verify(math_verifier, sandbox, "3", r"\boxed{x = 3}", named_values=False)[1]
    assert off.verdict is Verdict.incorrect


def test_units_can_be_required(math_verifier, sandbox):
    # Words that are not physical units are stripped by default (physical ones compare as quantities).
    assert _verify(math_verifier, sandbox, r"12\text{ apples}", r"\boxed{12 pears}")[1].verdict is Verdict.correct
    strict = _verify(math_verifier, sandbox, r"12\text{ apples}", r"\boxed{12 pears}", require_units=True)[1]
    assert strict.verdict is Verdict.incorrect
    same = _verify(math_verifier, sandbox, r"12\text{ cm}", r"\boxed{12\text{ cm}}", require_units=True)[1]
    assert same.verdict is Verdict.correct
    # The unit is one spelling however LaTeX wrote it.
    latex = _verify(math_verifier, sandbox, r"8\text{ cm}^2", r"\boxed{8\,\mathrm{cm}^{2}}", require_units=True)[1]
    assert latex.verdict is Verdict.correct
    wrong = _verify(math_verifier, sandbox, r"8\text{ cm}^2", r"\boxed{8 \mathrm{~cm}}", require_units=True)[1]
    assert wrong.verdict is Verdict.incorrect


def test_a_worked_gold_solution_is_extracted_and_the_evidence_says_so(math_verifier, sandbox):
    gold = r"The roots satisfy $(n-1)(n+2)=0$, so the solutions are $n = \boxed{1,-2}$."
    _, outcome = _verify(math_verifier, sandbox, gold, r"Hence \boxed{-2} and \boxed{1}.")
    assert outcome.verdict is Verdict.correct, outcome.evidence
    assert outcome.evidence["gold_extraction"] == "boxed"
    assert outcome.evidence["gold_extracted"] == "1,-2"
    _, wrong = _verify(math_verifier, sandbox, gold, r"Hence \boxed{-2} and \boxed{2}.")
    assert wrong.verdict is Verdict.incorrect


def test_hedge_reaches_the_trainer_as_a_flag(app_server: AppServer):
    with app_server.client() as c:
        r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "4"},
                                                    "responses": [r"\boxed{3} or \boxed{4}", r"\boxed{4}"]}]})
        assert r.status_code == 200, r.text
        hedge, honest = r.json()["groups"][0]["results"]
        assert hedge["verdict"] == "invalid_format" and "multiple_answers" in hedge["flags"]
        assert hedge["evidence"]["candidates"] == ["3", "4"]
        assert honest["verdict"] == "correct" and honest["reward"] == 1.0
