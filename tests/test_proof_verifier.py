"""The `proof` verifier through its Python API on the real sandbox: set.mm theorems, new
statements, inline databases, task errors naming the field, and the exploit corpus (each
exploit followed by an honest proof of the same theorem that still gets reward 1)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from service.testing.metamath import SET_MM
from verifiers.base import TaskInvalid, Verdict, VerifyContext
from verifiers.registry import get

pytestmark = pytest.mark.skipif(not SET_MM.exists(), reason="metamath-databases is not installed")

MP2 = {"system": "metamath", "database": "set.mm", "theorem": "mp2"}
MP2_COMPRESSED = "```metamath\n( wi ax-mp ) BCEABCGDFHH\n```"
MP2_NORMAL = "$= wps wch mp2.2 wph wps wch wi mp2.1 mp2.3 ax-mp ax-mp $."
MP2_RESTATED = "```metamath\nmp2 $p |- ch $= ( wi ax-mp ) BCEABCGDFHH $.\n```"
DEMO0 = "/usr/share/metamath/databases/demo0.mm"


@pytest.fixture(scope="module")
def judge(sandbox):
    verifier = get("proof")
    ctx = VerifyContext(sandbox)

    def run(task: dict, *responses: str):
        parsed = verifier.parse_task(task)
        outcomes = verifier.verify_many(parsed, list(responses), ctx)
        return [(o, o.reward(parsed)) for o in outcomes]

    yield run
    verifier.close(ctx)


def one(judge, task: dict, response: str):
    return judge(task, response)[0]


def components(outcome) -> dict[str, float]:
    return {c.name: c.value for c in outcome.components}


def assert_honest_still_passes(judge, task: dict = MP2, response: str = MP2_COMPRESSED) -> None:
    outcome, reward = one(judge, task, response)
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_compressed_normal_and_restated_proofs_are_correct_with_evidence(judge):
    for response in (MP2_COMPRESSED, MP2_NORMAL, MP2_RESTATED):
        outcome, reward = one(judge, MP2, response)
        assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
        assert components(outcome) == {"format": 1.0, "correctness": 1.0, "compliance": 1.0}
        assert outcome.evidence["axioms"] == ["ax-mp"] and outcome.evidence["steps"] == 11
    assert one(judge, MP2, MP2_NORMAL)[0].evidence["proof_format"] == "normal"


def test_wrong_proof_names_first_failing_step(judge):
    outcome, reward = one(judge, MP2, "$= wps wch mp2.2 mp2.3 ax-mp $.")
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    failure = outcome.evidence["first_failure"]
    assert failure["step"] == 5 and failure["label"] == "ax-mp" and "maj of ax-mp does not match" in failure["reason"]


def test_axiom_closure_and_forbidden_axioms(judge):
    task = {"system": "metamath", "database": "set.mm", "theorem": "ac5"}
    from service.testing.metamath import set_mm

    proof = "```metamath\n" + set_mm().proofs["ac5"] + "\n```"
    outcome, reward = one(judge, task, proof)
    assert reward == 1.0 and "ax-ac2" in outcome.evidence["axioms"] and "ax-ext" in outcome.evidence["axioms"]
    outcome, reward = one(judge, {**task, "forbidden_axioms": ["ax-ac2"]}, proof)
    assert (outcome.verdict, reward) == (Verdict.violation, 0.0)
    assert "uses_forbidden_axiom" in outcome.flags and outcome.evidence["forbidden_axioms_used"] == ["ax-ac2"]
    assert components(outcome)["correctness"] == 1.0 and components(outcome)["compliance"] == 0.0


def test_allowed_labels_limit_citations_but_not_syntax(judge):
    assert one(judge, {**MP2, "allowed": ["ax-mp"]}, MP2_COMPRESSED)[1] == 1.0
    outcome, reward = one(judge, {**MP2, "allowed": ["mpd"]}, MP2_COMPRESSED)
    assert (outcome.verdict, reward) == (Verdict.violation, 0.0)
    assert outcome.evidence["disallowed_references"] == ["ax-mp"]


def test_new_statement_uses_the_whole_database_and_its_disjoint_restrictions(judge):
    statement = {"label": "my-mp", "hypotheses": ["|- ph", "|- ( ph -> ps )"], "assertion": "|- ps"}
    task = {"system": "metamath", "database": "set.mm", "statement": statement}
    assert one(judge, task, "$= wph wps my-mp.1 my-mp.2 ax-mp $.")[1] == 1.0
    later = {"label": "my-a5", "assertion": "|- ( ph -> A. x ph )"}
    proof = "$= wph vx ax-5 $."
    outcome, reward = one(judge, {**task, "statement": later}, proof)
    assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0)
    assert "disjoint" in outcome.evidence["first_failure"]["reason"]
    assert one(judge, {**task, "statement": {**later, "disjoint": ["x ph"]}}, proof)[1] == 1.0


def test_inline_database(judge):
    text = Path(DEMO0).read_text()
    task = {"system": "metamath", "database": "inline", "database_text": text, "theorem": "th1"}
    proof = ("$= tt tze tpl tt weq tt tt weq tt a2 tt tze tpl tt weq tt tze tpl tt weq tt tt weq wim tt a2 "
             "tt tze tpl tt tt a1 mp mp $.")
    outcome, reward = one(judge, task, proof)
    assert reward == 1.0 and outcome.evidence["axioms"] == ["a1", "a2", "mp"]
    assert one(judge, task, proof.replace("a1 mp mp", "a1 mp"))[1] == 0.0
    with pytest.raises(TaskInvalid, match="task.database_text"):
        one(judge, {**task, "database_text": text.replace("$}", "", 1)}, proof)


@pytest.mark.parametrize(("task", "field"), [
    ({**MP2, "theorem": "no-such-theorem"}, "task.theorem"),
    ({**MP2, "theorem": "ax-mp"}, "task.theorem"),
    ({**MP2, "forbidden_axioms": ["mp2"]}, "task.forbidden_axioms"),
    ({**MP2, "allowed": ["nothing-here"]}, "task.allowed"),
    ({**MP2, "database": "missing.mm"}, "task.database"),
    ({"system": "metamath", "statement": {"label": "s", "assertion": "|- undeclared-symbol"}},
     "task.statement.assertion"),
    ({"system": "metamath", "statement": {"label": "s", "assertion": "|- ph", "disjoint": ["ph ph"]}},
     "task.statement.disjoint.0"),
])
def test_task_errors_name_the_field(judge, task, field):
    with pytest.raises(TaskInvalid, match=field.replace(".", r"\.")):
        one(judge, task, MP2_COMPRESSED)


@pytest.mark.parametrize("task", [
    {"system": "metamath", "theorem": "mp2", "statement": {"label": "x", "assertion": "|- ph"}},
    {"system": "metamath"},
    {"system": "lean", "theorem": "mp2"},
    {"system": "metamath", "theorem": "mp2 $a"},
    {"system": "metamath", "theorem": "mp2", "database_text": "x" * 2_000_001},
    {"system": "metamath", "theorem": "mp2", "timeout_s": 0},
])
def test_malformed_tasks_are_rejected_before_any_work(task):
    with pytest.raises(TaskInvalid, match="task"):
        get("proof").parse_task(task)


# ---------------------------------------------------------------- the exploit corpus


def test_exploit_declaring_an_axiom(judge):
    response = "```metamath\nax-cheat $a |- ch $.\nmp2 $p |- ch $= ax-cheat $.\n```"
    outcome, reward = one(judge, MP2, response)
    assert reward == 0.0 and outcome.verdict in (Verdict.invalid_format, Verdict.violation)
    assert components(outcome)["compliance"] == 0.0 and "$a" in outcome.evidence["declared"]
    assert_honest_still_passes(judge)


def test_exploit_redefining_a_constant(judge):
    for response in ("```metamath\n$c ch $.\n$v |- $.\nmp2 $p |- ch $= ( wi ax-mp ) BCEABCGDFHH $.\n```",
                     "```metamath\n${ $d ph ch $. $}\n( wi ax-mp ) BCEABCGDFHH\n```"):
        outcome, reward = one(judge, MP2, response)
        assert reward == 0.0 and outcome.verdict in (Verdict.violation, Verdict.invalid_format), outcome.evidence
        assert "declares_statements" in outcome.flags and components(outcome)["compliance"] == 0.0
    assert_honest_still_passes(judge)


# Round 15 blind probe: a restatement hidden behind a commented `$.`, and declarations outside the
# fenced block that holds the proof (each was rewarded 1.0). A closed `$p` before a bare span stays
# unread, as round 8 decided (tests/test_heldout8_proof.py, span_after_earlier_statement).
RULES_AROUND_THE_PROOF = [
    ("comment_hides_weaker_restatement", f"mp2 $p |- ( ps -> ch ) $( see below $. $) {MP2_NORMAL}", "incorrect"),
    ("declaration_in_an_earlier_block", f"```text\nh.x $e |- ch $.\n```\n{MP2_COMPRESSED}", "violation"),
    ("axiom_in_prose_after_the_block", f"{MP2_COMPRESSED}\nAnd ax-x $a |- ch $. holds.", "violation"),
    ("axiom_in_prose_before_the_block", f"Let ax-x $a |- ch $. be given.\n{MP2_COMPRESSED}", "violation"),
]


@pytest.mark.parametrize(("name", "response", "verdict"), RULES_AROUND_THE_PROOF,
                         ids=[case[0] for case in RULES_AROUND_THE_PROOF])
def test_exploit_rules_hold_around_the_proof(judge, name, response, verdict):
    outcome, reward = one(judge, MP2, response)
    assert (outcome.verdict.value, reward) == (verdict, 0.0), outcome.evidence
    if verdict == "violation":
        assert "declares_statements" in outcome.flags and components(outcome)["compliance"] == 0.0
    outcome, reward = one(judge, MP2, f"mp2 $p |- ch $( restated $. $) {MP2_NORMAL}")
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence
    outcome, reward = one(judge, MP2, f"Using the $e hypotheses and the $a axiom ax-mp:\n{MP2_COMPRESSED}")
    assert (outcome.verdict, reward) == (Verdict.correct, 1.0), outcome.evidence


def test_exploit_proof_of_a_weaker_statement(judge):
    # A correct proof of `|- ( ps -> ch )`, and a restated $p with the hypothesis as its claim.
    for response in ("$= wph wps wch wi mp2.1 mp2.3 ax-mp $.", "```metamath\nmp2 $p |- ph $= mp2.1 $.\n```"):
        outcome, reward = one(judge, MP2, response)
        assert (outcome.verdict, reward) == (Verdict.incorrect, 0.0), outcome.evidence
        assert "not" in outcome.evidence["first_failure"]["reason"] or "restates" in \
            outcome.evidence["first_failure"]["reason"]
    assert_honest_still_passes(judge)


def test_exploit_incomplete_proof_with_unknown_steps(judge):
    for response in ("$= ( wi ax-mp ) BCEABCGDF?H $.", "$= wps wch ? mp2.3 ax-mp $.", "$= ? $."):
        outcome, reward = one(judge, MP2, response)
        assert (outcome.verdict, reward) == (Verdict.violation, 0.0), outcome.evidence
        assert "incomplete_proof" in outcome.flags
    assert_honest_still_passes(judge)


def test_exploit_citing_the_target_or_a_later_theorem(judge):
    for response, word in (("$= wph wps wch mp2.1 mp2.2 mp2.3 mp2 $.", "itself"),
                           ("$= ( mp2b ) ABCDEFG $.", "after"),
                           ("$= wph wps wch mp2.1 mp2.2 mp2.3 mp2b $.", "after")):
        outcome, reward = one(judge, MP2, response)
        assert (outcome.verdict, reward) == (Verdict.violation, 0.0), outcome.evidence
        assert word in outcome.evidence["first_failure"]["reason"] or word == "itself" and \
            "theorem it proves" in outcome.evidence["first_failure"]["reason"]
    statement = {"label": "mine", "hypotheses": ["|- ph"], "assertion": "|- ph"}
    task = {"system": "metamath", "statement": statement}
    assert one(judge, task, "$= wph mine.1 mine $.")[0].verdict == Verdict.violation
    assert one(judge, task, "$= mine.1 $.")[1] == 1.0
    assert_honest_still_passes(judge)


def test_exploit_enormous_proof(judge):
    huge = "$= " + "wph " * 3_000_000 + "$."
    outcome, reward = one(judge, MP2, huge)
    assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0)
    assert "max_proof_steps" in outcome.evidence["first_failure"]["reason"]
    outcome, reward = one(judge, {**MP2, "max_proof_steps": 50}, "$= " + "wph " * 60 + "$.")
    assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0)
    assert_honest_still_passes(judge)


def test_exploit_deeply_nested_compressed_data(judge):
    # A step number of 200,000 digits, and a proof whose saved steps double an expression.
    outcome, reward = one(judge, MP2, "$= ( wi ax-mp ) " + "U" * 200_000 + "A $.")
    assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0)
    doubling = "AZ" + "".join(f"{chr(72 + i)}{chr(72 + i)}GZ" for i in range(12)) + "UUUUA"
    outcome, reward = one(judge, MP2, f"$= ( wi ax-mp ) {doubling} $.")
    assert outcome.verdict in (Verdict.incorrect, Verdict.invalid_format) and reward == 0.0
    deep = "$= ( wi ax-mp ) AZ" + "".join(f"{'UVWXY'[i % 5]}A" for i in range(100)) + " $."
    outcome, reward = one(judge, {**MP2, "max_expression": 1000}, deep)
    assert reward == 0.0 and outcome.verdict != Verdict.error
    assert_honest_still_passes(judge)


def test_exploit_non_ascii_tricks(judge):
    for response in ("$= ( wi \u0430x-mp ) BCEABCGDFHH $.",  # Cyrillic a
                     "$= ( wi ax-mp ) BCEABCG\u200bDFHH $.",  # zero-width space
                     "```metamath\n\uff04\uff1d ( wi ax-mp ) BCEABCGDFHH \uff04\uff0e\n```",  # full-width $= $.
                     "$= ( wi ax\u2011mp ) BCEABCGDFHH $.",  # non-breaking hyphen
                     "$= ( wi ax-mp ) \uff22CEABCGDFHH $."):  # full-width B
        outcome, reward = one(judge, MP2, response)
        assert (outcome.verdict, reward) == (Verdict.invalid_format, 0.0), outcome.evidence
    assert_honest_still_passes(judge)


def test_red_team_hostile_proofs_never_yield_error(judge):
    rng = random.Random(15)
    alphabet = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ?()$=. \n\t") + ["\u0430", "\x00", "\u202e", "\U0001f600"]
    labels = ["wi", "ax-mp", "mp2", "mp2.1", "mp2.2", "mp2.3", "wph", "wps", "wch", "(", ")", "?", "$=", "$.",
              "mp2b", "ax-ac", "idi", "a1i", "$a", "${", "$}", "UUUUUUUUA", "Z"]
    responses = []
    for _ in range(150):
        letters = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        responses.append(f"$= ( wi ax-mp ) {letters} $.")
        responses.append("$= " + " ".join(rng.choice(labels) for _ in range(rng.randint(0, 40))) + " $.")
    responses += ["$= ( $.", "$= ) ( $.", "$= ( ( wi ) ) A $.", "$= ( wi wi ) AB $.", "$= ( mp2.1 ) A $.",
                  "```metamath\n```", "```metamath\n$=\n```", "$= $.", "$=$.", "\x00" * 100,
                  "$= ( wi ax-mp ) ZZZZ $.", "$= ( wi ax-mp ) A?Z $.", "$= ( wi ax-mp ) " + "Y" * 40 + "T $."]
    results = judge(MP2, *responses)
    errors = [(r, o.evidence) for r, (o, _) in zip(responses, results, strict=True) if o.verdict == Verdict.error]
    assert errors == []
    assert all(reward == 0.0 for _, reward in results)
    assert_honest_still_passes(judge)
