"""What a policy may be shown about a `math` decision (see verifiers/feedback.py):
whether and what final answer was extracted from the response, how, and the format
problem. Never the gold, its normal form, or how the two were compared (exact or with a
tolerance says whether the gold is a decimal)."""

from __future__ import annotations

from typing import Any

from verifiers.base import Outcome, TaskBase
from verifiers.feedback import pick


def math_feedback(task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
    evidence = outcome.evidence
    return {"verdict": outcome.verdict.value,
            **pick(evidence, "extracted", "extraction", "answer_normalised", "candidates", "reason")}
