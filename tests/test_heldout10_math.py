"""Held-out math answers, round 10: written blind (docs/math_verifier.md and the README only, before
the verifier's code was read), labelled with the verdict a careful grader gives
(tests/data/heldout10/math.json): equivalent forms that must be accepted, and hedges, near misses,
answers only in the thought, empty or unbalanced tags and prompt echoes that must not be. Through
the public HTTP API on the in-process app and the process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout8_support import check_verdict
from tests.heldout9_support import held_to, judge_cases, load_cases

CASES = load_cases("math", "heldout10")

# Written after the blind run, for its fix (math 2.5.0): a word before the value that says how exact it
# is ("approximately", "about", "roughly", "around", "approx.", "exactly", "only") is no part of the
# value, as `\approx` before it is not; the value is then judged by the usual rules (invalid_format before).
C, X, F = "correct", "incorrect", "invalid_format"
FIX_CASES: list[dict] = [
    {"name": name, "task": {"answer": gold}, "response": f"<think>Work.</think><answer>{tagged}</answer>",
     "expected": want}
    for name, gold, tagged, want in [
        ("approximately_pi", "\\pi", "approximately 3.142", C),
        ("about_integer", "12", "about 12", C),
        ("roughly_with_unit", "12", "roughly 12 cm", C),
        ("approx_dot", "\\pi", "approx. 3.1416", C),
        ("around_boxed_text", "12", "\\boxed{\\text{around } 12}", C),
        ("exactly_fraction", "\\frac{1}{3}", "exactly \\frac{1}{3}", C),
        ("trailing_parenthesis", "\\pi", "3.142 (approximately)", C),
        ("approximately_too_coarse", "\\pi", "approximately 3.14", X),
        ("about_wrong_value", "12", "about 13", X),
        ("about_a_hedge", "12", "about 12 or 13", F),
        ("nearly_is_not_approximately", "12", "nearly 12", F),
    ]
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "math", CASES + FIX_CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_heldout10_math(verdicts, case):
    check_verdict(verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", FIX_CASES, ids=[case["name"] for case in FIX_CASES])
def test_heldout10_math_fixes(verdicts, case):
    check_verdict(verdicts[case["name"]], case["expected"])
