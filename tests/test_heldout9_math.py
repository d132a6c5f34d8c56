"""Held-out math answers, round 9: written blind (docs/math_verifier.md, DESIGN.md and the README
only, before the verifier's code was read), labelled with the verdict a careful grader gives
(tests/data/heldout9/math.json). Through the public HTTP API on the in-process app and the
process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout9_support import check_expected, held_to, judge_cases, load_cases

CASES = load_cases("math")


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "math", CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_heldout9_math(verdicts, case):
    check_expected(verdicts[case["name"]], held_to(case))
