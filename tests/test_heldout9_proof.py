"""Held-out Metamath proofs against set.mm, round 9: written blind (docs/proof_verifier.md only),
every proof also checked with Debian's `metamath` (a copy inserted right after the theorem, or
a new `${ $}` block at the end for new statements) (tests/data/heldout9/proof.json).

The first proof request of the suite's services reads set.mm (seconds): marked slow.
"""

from __future__ import annotations

import pytest

from tests.heldout9_support import check_expected, held_to, judge_cases, load_cases

pytestmark = pytest.mark.slow

CASES = load_cases("proof")


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "proof", CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_heldout9_proof(verdicts, case):
    check_expected(verdicts[case["name"]], held_to(case))
