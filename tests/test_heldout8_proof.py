"""Held-out Metamath proofs against set.mm, round 8: written blind (docs/proof_verifier.md
only), every proof of an existing theorem labelled with Debian's `metamath` too. Blind score
25/26 before the round's fix (a restatement before a bare `$= ... $.` span was not read),
26/26 after; then regression cases for that fix.

The first proof request of the suite's services reads set.mm (seconds): marked slow.
"""

from __future__ import annotations

import pytest

from tests.heldout8_proof_cases import PROOF_CASES, theorem
from tests.heldout8_support import check_verdict, verdicts_of

pytestmark = pytest.mark.slow

# X: incorrect (a wrong answer)
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"

FIX_CASES: list[tuple[str, dict, str, str]] = [
    ("span_restates_other_theorem", theorem("sylibr"),
     "sylib $p |- ( ph -> ch ) $= wph wps wch sylibr.1 wch wps sylibr.2 biimpri syl $.", C),
    ("span_restates_stronger", theorem("simpli"),
     "By simpl: simpli $p |- ( ph /\\ ps ) $= wph wps wa wph simpli.1 wph wps simpl ax-mp $.", X),
    ("span_after_earlier_statement", theorem("simpli"),
     "Note h $p |- ps $. Now: $= wph wps wa wph simpli.1 wph wps simpl ax-mp $.", C),
    ("span_restatement_in_comment_not_read", theorem("simpli"),
     "simpli $p $( |- ps $) |- ph $= wph wps wa wph simpli.1 wph wps simpl ax-mp $.", C),
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return verdicts_of(client, "proof", PROOF_CASES + FIX_CASES)


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in PROOF_CASES])
def test_heldout8_proof(verdicts, name, expected):
    check_verdict(verdicts[name], expected)


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in FIX_CASES])
def test_heldout8_proof_fixes(verdicts, name, expected):
    check_verdict(verdicts[name], expected)


def test_a_weaker_restatement_in_prose_fails_correctness_naming_why(verdicts):
    result = verdicts["jca_weaker_restatement"]
    assert result["components"]["correctness"]["value"] == 0.0, result
    assert "restates" in result["evidence"]["first_failure"]["reason"], result
