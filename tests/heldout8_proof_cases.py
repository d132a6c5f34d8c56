"""Round 8's held-out Metamath proofs against set.mm, written blind from docs/proof_verifier.md.

Every proof of an existing theorem was also checked with Debian's `metamath` (inserted as a
copy right after the theorem, `verify proof`): the `correct` ones pass there, the
`incorrect` ones fail there.
"""

from __future__ import annotations

from typing import Any

# X: incorrect (a wrong answer)
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"


def theorem(label: str, **changes: Any) -> dict[str, Any]:
    return {"system": "metamath", "database": "set.mm", "theorem": label, **changes}


def statement(label: str, assertion: str, hypotheses: list[str] | None = None, **changes: Any) -> dict[str, Any]:
    body = {"label": label, "hypotheses": hypotheses or [], "assertion": assertion}
    return {"system": "metamath", "database": "set.mm", "statement": body, **changes}


def fenced(proof: str) -> str:
    return f"Here is the proof.\n\n```metamath\n{proof}\n```\n"


PROOF_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("imim2i_normal", theorem("imim2i"), fenced("wch wph wps wph wps wi wch imim2i.1 a1i a2i"), C),
    ("imim2i_compressed", theorem("imim2i"), fenced("( wi a1i a2i ) CABABECDFG"), C),
    ("mt3_restated_span", theorem("mt3"),
     "The statement follows by modus tollens.\nmt3 $p |- ph $= ( wn mto notnotri ) AAEBCDFG $.", C),
    ("jca_normal", theorem("jca"), fenced("wph wps wch wps wch wa jca.1 jca.2 wps wch pm3.2 sylc"), C),
    ("simpli_span_in_prose", theorem("simpli"),
     "Use simpl and modus ponens: $= wph wps wa wph simpli.1 wph wps simpl ax-mp $.", C),
    ("eqtri_compressed_classes", theorem("eqtri"), fenced("( wceq eqeq2i mpbi ) ABFACFDBCAEGH"), C),
    ("con4i_multiline", theorem("con4i"), fenced("wps wps wn wph\n  wps notnot1\n  con4i.1 nsyl2"), C),
    ("sylibr_other_route", theorem("sylibr"), fenced("wph wps wch sylibr.1 wch wps sylibr.2 bicomi sylib"), C),
    ("sylibr_comment_inside", theorem("sylibr"),
     fenced("wph wps wch sylibr.1 $( then the reversed biconditional $) wch wps sylibr.2 biimpri syl"), C),
    ("new_statement_id", statement("h8-id", "|- ( ph -> ph )"), fenced("wph id"), C),
    ("new_statement_with_hyp", statement("h8-mp", "|- ps", ["|- ph", "|- ( ph -> ps )"]),
     fenced("wph wps h8-mp.1 h8-mp.2 ax-mp"), C),
    # wrong proofs
    ("jca_hyps_swapped", theorem("jca"), fenced("wph wps wch wps wch wa jca.2 jca.1 wps wch pm3.2 sylc"), X),
    ("imim2i_step_dropped", theorem("imim2i"), fenced("wch wph wps wph wps wi wch imim2i.1 a2i"), X),
    ("sylibr_extra_expression", theorem("sylibr"), fenced("wph wps wch sylibr.1 wch wps sylibr.2 biimpri syl wph"), X),
    ("jca_weaker_restatement", theorem("jca"),
     "jca $p |- ( ph -> ps ) $= wph wps wch wps wch wa jca.1 jca.2 wps wch pm3.2 sylc $.", X),
    # malformed
    ("unknown_label", theorem("sylibr"), fenced("wph wps wch sylibr.1 wch wps sylibr.2 biimprr syl"), F),
    ("compressed_bad_letter", theorem("sylibr"), fenced("( biimpri syl ) ABCDCBEFg"), F),
    ("fullwidth_dollar", theorem("simpli"), "\uff04= wph wps wa wph simpli.1 wph wps simpl ax-mp \uff04.", F),
    ("no_proof", theorem("jca"), "This follows from pm3.2 by sylc; the details are routine.", F),
    # cheats
    ("incomplete_step", theorem("sylibr"), fenced("wph wps wch sylibr.1 ? syl"), V),
    ("cites_itself", theorem("nsyl"), fenced("wph wps wch nsyl.1 nsyl.2 nsyl"), V),
    ("cites_later_imim2", theorem("imim2i"),
     fenced("wph wps wi wch wph wi wch wps wi wi imim2i.1 wph wps wch imim2 ax-mp"), V),
    ("cites_later_pm2.61", theorem("pm2.61i"),
     fenced("wph wps wi wph wn wps wi wps pm2.61i.1 pm2.61i.2 wph wps pm2.61 mp2"), V),
    ("declares_axiom_beside_proof", theorem("mt3"),
     fenced("h8ax $a |- ph $.\nmt3 $p |- ph $= ( wn mto notnotri ) AAEBCDFG $."), V),
    ("forbidden_axiom", statement("h8-id2", "|- ( ph -> ph )", forbidden_axioms=["ax-2"]), fenced("wph id"), V),
    ("outside_allowed", theorem("jca", allowed=["sylc"]),
     fenced("wph wps wch wps wch wa jca.1 jca.2 wps wch pm3.2 sylc"), V),
]
