"""What a policy may be shown about a `proof` decision (see verifiers/feedback.py): how
the proof was found, the first failing step and why, and compliance problems (a proof
task's statement and database are public, so the checker's own words are shown)."""

from __future__ import annotations

from typing import Any

from verifiers.base import Outcome, TaskBase
from verifiers.feedback import pick


def proof_feedback(task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
    evidence = outcome.evidence
    return {"verdict": outcome.verdict.value,
            **pick(evidence, "extraction", "declared", "proof_chars", "steps", "first_failure",
                   "compliance_failures", "proof_format", "axioms", "axiom_count",
                   "references", "forbidden_axioms_used")}
