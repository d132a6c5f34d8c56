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

