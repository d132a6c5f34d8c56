"""Held-out math answers, round 9: written blind (docs/math_verifier.md, DESIGN.md and the README
only, before the verifier's code was read), labelled with the verdict a careful grader gives
(tests/data/heldout9/math.json). Through the public HTTP API on the in-process app and the
process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout8_support import check_verdict
from tests.heldout9_support import held_to, judge_cases, load_cases

CASES = load_cases("math")

# Written after the blind run, for its fix (math 2.4.0): a sentence in an answer tag states its value
# after a verb of reaching a value, as after "is"; what follows is read as any answer phrase is.
C, X, F = "correct", "incorrect", "invalid_format"
FIX_CASES: list[dict] = [
    {"name": name, "task": {"answer": gold}, "response": f"<think>Work.</think><answer>{tagged}</answer>",
     "expected": want}
    for name, gold, tagged, want in [
        ("converges_to", "2", "The series converges to 2.", C),
        ("approaches_wrong_value", "1", "The limit approaches 0.", X),
        ("simplifies_to_fraction", "\\frac{1}{2}", "The expression simplifies to \\frac{1}{2}.", C),
        ("comes_to_currency", "12", "The total comes to \\$12.", C),
        ("is_equal_to", "9", "The value is equal to 9.", C),
        ("reaches_a_hedge", "3", "It simplifies to 3 or 4.", F),
        ("verb_without_value", "1", "The limit tends to", F),
        ("copula_still_reads", "7", "The number of ways is 7.", C),
        ("diverges_to_minus_infinity_wrong_sign", "\\infty", "The limit diverges to -\\infty.", X),
    ]
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "math", CASES + FIX_CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_heldout9_math(verdicts, case):
    check_verdict(verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", FIX_CASES, ids=[case["name"] for case in FIX_CASES])
def test_heldout9_math_fixes(verdicts, case):
    check_verdict(verdicts[case["name"]], case["expected"])
