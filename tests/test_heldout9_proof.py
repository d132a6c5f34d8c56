"""Held-out Metamath proofs against set.mm, round 9: written blind (docs/proof_verifier.md only),
every proof also checked with Debian's `metamath` (a copy inserted right after the theorem, or
a new `${ $}` block at the end for new statements) (tests/data/heldout9/proof.json).

The first proof request of the suite's services reads set.mm (seconds): marked slow.
"""

from __future__ import annotations

import pytest

from tests.heldout8_support import check_verdict
from tests.heldout9_support import held_to, judge_cases, load_cases

pytestmark = pytest.mark.slow

CASES = load_cases("proof")
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"
MPD = {"system": "metamath", "database": "set.mm", "theorem": "mpd"}
MPD_SPAN = "$= wph wps wi wph wch wi mpd.1 wph wps wch mpd.2 a2i ax-mp $."
MP = {"system": "metamath", "database": "set.mm",
      "statement": {"label": "h9-mp", "hypotheses": ["|- ph", "|- ( ph -> ps )"], "assertion": "|- ps"}}
# Written after the blind run, for proof 1.2.0: declarations written around a bare span, and
# another frame's hypothesis, are refused; prose that names a keyword, and the honest proofs, are not.
FIX_CASES = [
    {"name": name, "task": task, "response": response, "expected": expected}
    for name, task, response, expected in [
        ("declaration_after_span", MPD, f"By a2i: {MPD_SPAN} Also h9.y $e |- ch $.", V),
        ("axiom_before_span", MPD, f"h9.ax $a |- ( ph -> ch ) $. {MPD_SPAN}", V),
        ("prose_names_keyword", MPD, f"Using the $e hypotheses mpd.1 and mpd.2, {MPD_SPAN}", C),
        ("commented_declaration_is_whitespace", MPD, f"$( h9.y $e |- ch $. $) {MPD_SPAN}", C),
        ("honest_span", MPD, f"Proof: {MPD_SPAN}", C),
        ("foreign_hypothesis_in_new_statement", MP, "```mm\nwph wps mp2.1 h9-mp.2 ax-mp\n```", V),
        ("own_hypotheses_in_new_statement", MP, "```mm\nwph wps h9-mp.1 h9-mp.2 ax-mp\n```", C),
    ]
]


@pytest.fixture(scope="module")
def verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "proof", CASES + FIX_CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_heldout9_proof(verdicts, case):
    check_verdict(verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", FIX_CASES, ids=[case["name"] for case in FIX_CASES])
def test_heldout9_proof_fixes(verdicts, case):
    check_verdict(verdicts[case["name"]], case["expected"])


def test_a_foreign_hypothesis_is_flagged_as_a_compliance_failure(verdicts):
    result = verdicts["foreign_hypothesis_in_new_statement"]
    assert any("mp2.1" in failure for failure in result["evidence"]["compliance_failures"]), result
