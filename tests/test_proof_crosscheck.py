"""Cross-check with Debian's `metamath`: database proofs of a sample of set.mm theorems
verify in both checkers, and mutations of them (swapped steps, a dropped step, a wrong
hypothesis, a later theorem, the theorem itself) fail in both.

For `metamath`, each mutation is a copy of the theorem inserted right after it in set.mm
(same scope, so the same frame), all checked in one run; ours checks the same proof
against the original theorem through the verifier and its sandbox."""

from __future__ import annotations

import random

import pytest

from service.testing.metamath import (
    METAMATH,
    SET_MM,
    encode_number,
    join_compressed,
    metamath_verdicts,
    set_mm,
    set_mm_text,
    split_compressed,
    with_copies,
)
from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

# Reading set.mm with its proofs and two metamath runs: about a minute on an idle 2-core
# machine, far more on a shared one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.skipif(not SET_MM.exists() or METAMATH is None,
                                 reason="metamath and metamath-databases are not installed")]
SAMPLE = 520
MUTATED_THEOREMS = 40


@pytest.fixture(scope="module")
def ours(sandbox):
    verifier = get("proof")
    ctx = VerifyContext(sandbox)

    def check(label: str, proof: str):
        task = verifier.parse_task({"system": "metamath", "database": "set.mm", "theorem": label})
        return verifier.verify(task, f"```metamath\n{proof}\n```", ctx)

    yield check
    verifier.close(ctx)


def _theorems() -> list[str]:
    return [label for label, a in set_mm().assertions.items() if a.kind == "p"]


# metamath's verdicts do not depend on the sandbox backend `ours` runs on: one metamath run
# for the sample and one for the mutations, shared by every backend's test.


@pytest.fixture(scope="module")
def sampled() -> tuple[list[str], dict[str, bool]]:
    """The sample of theorems and metamath's verdict on each."""
    labels = random.Random(1515).sample(_theorems(), SAMPLE)
    return labels, metamath_verdicts(SET_MM, labels)


def test_database_proofs_of_a_sample_verify_in_both(ours, sampled):
    db = set_mm()
    sample, reference = sampled
    assert all(reference.values()), [label for label, ok in reference.items() if not ok]
    wrong = []
    for label in sample:
        outcome = ours(label, db.proofs[label])
        if outcome.verdict != Verdict.correct:
            wrong.append((label, outcome.verdict, outcome.evidence.get("first_failure")))
    assert wrong == []


def _mutations(label: str, copy_label: str, later: str) -> dict[str, tuple[str, str]]:
    """kind -> (proof for our check of `label`, proof for metamath's copy `copy_label`)."""
    db = set_mm()
    labels, chunks = split_compressed(db.proofs[label])
    steps = [i for i, c in enumerate(chunks) if c not in ("Z", "?")]
    out: dict[str, tuple[str, str]] = {}
    # Swapped steps: the first adjacent pair of different step numbers.
    for a, b in zip(steps, steps[1:], strict=False):
        if b == a + 1 and chunks[a] != chunks[b]:
            swapped = chunks[:a] + [chunks[b], chunks[a]] + chunks[b + 1:]
            out["swapped"] = (join_compressed(labels, swapped),) * 2
            break
    # A dropped step: one not saved by Z, from the middle.
    droppable = [i for i in steps if i + 1 >= len(chunks) or chunks[i + 1] != "Z"]
    drop = droppable[len(droppable) // 2]
    out["dropped"] = (join_compressed(labels, chunks[:drop] + chunks[drop + 1:]),) * 2
    # A wrong hypothesis: a reference to one mandatory hypothesis turned into another.
    hyps = db.assertions[label].hyps
    for i in steps:
        number = _number(chunks[i])
        if number <= len(hyps):
            other = next(n for n in range(1, len(hyps) + 1)
                         if db.hyps[hyps[n - 1]].expr != db.hyps[hyps[number - 1]].expr)
            wrong = chunks[:i] + [encode_number(other)] + chunks[i + 1:]
            out["wrong_hypothesis"] = (join_compressed(labels, wrong),) * 2
            break
    # The last cited assertion replaced by a later theorem, or by the theorem itself.
    out["later_theorem"] = (join_compressed(labels[:-1] + [later], chunks),) * 2
    out["itself"] = (join_compressed(labels[:-1] + [label], chunks),
                     join_compressed(labels[:-1] + [copy_label], chunks))
    return out


def _number(chunk: str) -> int:
    n = 0
    for ch in chunk:
        n = n * 5 + ord(ch) - 84 if ch >= "U" else n * 20 + ord(ch) - 64
    return n


@pytest.fixture(scope="module")
def mutated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, tuple[str, str, str]], dict[str, bool]]:
    """Our proofs of the mutations (copy label -> (theorem, kind, proof)) and metamath's
    verdict on each copy in a mutated set.mm."""
    db = set_mm()
    theorems = _theorems()
    rng = random.Random(1516)
    # Theorems with at least two different hypotheses and a proof long enough to mutate.
    candidates = [t for t in theorems if len({db.hyps[h].expr for h in db.assertions[t].hyps}) >= 2
                  and db.proofs[t].startswith("(") and len(split_compressed(db.proofs[t])[1]) >= 6]
    chosen = rng.sample(candidates, MUTATED_THEOREMS)
    later_of = {t: theorems[min(theorems.index(t) + 1, len(theorems) - 1)] for t in chosen}
    copies: dict[str, list[tuple[str, str]]] = {}
    ours_proofs: dict[str, tuple[str, str, str]] = {}
    for n, label in enumerate(chosen):
        for kind, (mine, theirs) in _mutations(label, f"{label}-mut-{n}-itself", later_of[label]).items():
            copy_label = f"{label}-mut-{n}-{kind.replace('_', '-')}"
            if kind == "itself":
                copy_label = f"{label}-mut-{n}-itself"
            copies.setdefault(label, []).append((copy_label, theirs))
            ours_proofs[copy_label] = (label, kind, mine)
    mutated_db = tmp_path_factory.mktemp("crosscheck") / "mutated.mm"
    mutated_db.write_text(with_copies(set_mm_text(), copies, db), encoding="ascii")
    return ours_proofs, metamath_verdicts(mutated_db, list(ours_proofs))


def test_mutated_proofs_fail_in_both(ours, mutated):
    ours_proofs, reference = mutated
    kinds_seen = set()
    disagreements = []
    for copy_label, (label, kind, proof) in ours_proofs.items():
        kinds_seen.add(kind)
        outcome = ours(label, proof)
        if reference[copy_label] or outcome.verdict == Verdict.correct or outcome.verdict == Verdict.error:
            disagreements.append((copy_label, reference[copy_label], outcome.verdict,
                                  outcome.evidence.get("first_failure")))
        if kind in ("later_theorem", "itself"):
            assert outcome.verdict == Verdict.violation, (copy_label, outcome.evidence)
    assert disagreements == []
    assert kinds_seen == {"swapped", "dropped", "wrong_hypothesis", "later_theorem", "itself"}
