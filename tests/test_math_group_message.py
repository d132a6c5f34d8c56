"""A math group goes to a resident server in one message (`ResidentSpec.parts`), and each
answer still gets its own time budget and its own verdict.

Hostile answers that run their parse to the limit, placed among honest and wrong ones: each
hostile one gets `timeout` (never a reward, never `error`), every other answer gets the
verdict of its own text in its own place (a neighbour's verdict is never moved onto it), and
two hangs in one group cost about two budgets, not one budget per answer of the group. Run
through `verify_many` on the real sandbox, on every backend in ASSAY_TEST_BACKENDS.
"""

from __future__ import annotations

import time

import pytest

from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

# Process starts, the resident server killed by a hang and its replacement, a loaded 2-core machine.
MARGIN_S = 20.0
HANG = r"The answer is \boxed{\frac{(x+1)^{190}-(x+2)^{190}}{(x+3)^{190}-(x+4)^{190}}}"


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox, reveal_hidden=True)


def test_the_group_is_one_message_and_each_answer_keeps_its_own_verdict(ctx):
    judge = get("math")
    task = judge.parse_task({"answer": "\\frac{3}{4}"})
    texts = ["so it is \\boxed{0.75}", "\\boxed{4/3}", "The answer: 3/4", "\\boxed{\\dfrac{6}{8}}",
             "no idea", "\\boxed{0.7}", "\\boxed{75\\%}", "we get \\boxed{\\frac34}"]
    want = [Verdict.correct, Verdict.incorrect, Verdict.correct, Verdict.correct, Verdict.invalid_format,
            Verdict.incorrect, Verdict.correct, Verdict.correct]
    judge.verify_many(task, texts, ctx)  # warm servers and caches
    outcomes = judge.verify_many(task, texts, ctx)
    assert [o.verdict for o in outcomes] == want, [(o.verdict, o.evidence) for o in outcomes]
    # The same answers one at a time agree, answer by answer.
    assert [judge.verify(task, t, ctx).verdict for t in texts] == want


def test_two_hangs_in_one_message_cost_their_own_budgets_only(ctx):
    judge = get("math")
    task = judge.parse_task({"answer": "x^2+2x+1", "timeout_s": 0.25})
    honest = [r"\boxed{(x+1)^2}", r"so \boxed{x^2 + 2x + 1}", r"\boxed{1+2x+x^2}", r"\boxed{x(x+2)+1}"]
    judge.verify_many(task, honest, ctx)
    started = time.monotonic()
    alone = judge.verify_many(task, honest, ctx)
    honest_s = time.monotonic() - started
    assert all(o.verdict is Verdict.correct for o in alone)
    # A hang first, one in the middle, and a wrong answer right after each hang.
    group = [HANG, r"\boxed{x^2+1}", honest[0], honest[1], HANG, r"\boxed{(x-1)^2}", honest[2], honest[3]]
    started = time.monotonic()
    outcomes = judge.verify_many(task, group, ctx)
    group_s = time.monotonic() - started
    seen = [(o.verdict, o.evidence) for o in outcomes]
    assert [o.verdict for o in outcomes] == [Verdict.timeout, Verdict.incorrect, Verdict.correct, Verdict.correct,
                                             Verdict.timeout, Verdict.incorrect, Verdict.correct, Verdict.correct], seen
    assert [o.reward(task) for o in outcomes] == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert all("math_parse_timeout" in o.flags for o in (outcomes[0], outcomes[4]))
    # Two budgets of 0.25 s, not eight: far below 8 x the per-answer budget plus restarts.
    assert group_s <= honest_s + 2 * 0.25 + MARGIN_S, (group_s, honest_s)
    # Afterwards the honest group is judged as before.
    assert all(o.verdict is Verdict.correct for o in judge.verify_many(task, honest, ctx))



def test_equal_answers_in_a_group_are_judged_once(ctx):
    """A group's responses that end in the same answer (however the text around it is written)
    get one judgement between them: seven copies of a hang cost one budget, not seven, and all
    seven get the same verdict and no reward; the honest answer beside them keeps its reward."""
    judge = get("math")
    budget = 1.0
    task = judge.parse_task({"answer": "x^2+2x+1", "timeout_s": budget})
    # Not HANG itself: a server whose parse of it finished near this budget keeps sympy's cache of
    # it, and would then finish HANG within the other tests' budgets.
    hang = HANG.replace("190", "187")
    other_text = hang.replace("The answer is ", "Putting it together, ")
    group = [hang, other_text, hang, hang, other_text, r"\boxed{(x+1)^2}", hang, other_text]
    judge.verify_many(task, [r"\boxed{(x+1)^2}"], ctx)  # warm servers
    started = time.monotonic()
    outcomes = judge.verify_many(task, group, ctx)
    group_s = time.monotonic() - started
    seen = [(o.verdict, o.evidence) for o in outcomes]
    # The hang's parse may finish near its budget on a fast machine (then `incorrect`): either way
    # every copy has the same verdict. Judged one by one they did not (timeout, then incorrect).
    hangs = {o.verdict for i, o in enumerate(outcomes) if i != 5}
    assert len(hangs) == 1 and hangs <= {Verdict.timeout, Verdict.incorrect}, seen
    assert outcomes[5].verdict is Verdict.correct, seen
    assert [o.reward(task) for o in outcomes] == [0.0] * 5 + [1.0] + [0.0] * 2
    # Seven budgets would be 7 s; one budget, a replaced server and a fresh process are far less.
    assert group_s < 3.5 * budget, group_s
