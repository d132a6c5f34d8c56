"""Stage 4, score: a verifier's outcome becomes a decision — the task's policies applied
(truncation, flag promotion), the reward with its hard gates, components, flags, the
feedback a policy may be shown, and whether the response is masked from group statistics.

The one place an outcome is turned into what callers and records get (`Scored`); the
pipeline, replay and the CLI's local `assay verify` all score here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.executors.base import Judged
from service.pipeline.resolve import Resolved, ResolvedGroup
from service.schemas import GroupError
from verifiers.base import Outcome, Verdict
from verifiers.inspection import Generation, apply_policies, is_masked


@dataclass(frozen=True)
class Scored:
    """One response's decision."""

    generation: Generation
    outcome: Outcome  # with the task's policies applied
    reward: float
    components: dict[str, dict[str, Any]]
    feedback: dict[str, Any]
    flag_evidence: dict[str, dict[str, Any]]
    masked: bool
    duration_ms: float  # as measured (records keep it to the microsecond)

    @property
    def verdict(self) -> str:
        return self.outcome.verdict.value

    @property
    def flags(self) -> list[str]:
        return list(self.flag_evidence)

    @property
    def counted(self) -> bool:
        """In the group statistics: neither verdict `error` nor masked by the truncation policy."""
        return self.verdict != Verdict.error.value and not self.masked

    def shown(self, resolved: Resolved) -> dict[str, Any]:
        """The decision as the CLI's local `assay verify` prints it (no record, no receipt)."""
        return {"verifier": resolved.verifier.name, "verifier_version": resolved.verifier.version,
                "reward": self.reward, "verdict": self.verdict, "components": self.components,
                "evidence": self.outcome.evidence, "feedback": self.feedback, "flags": self.flags,
                "flag_evidence": self.flag_evidence, "duration_ms": round(self.duration_ms, 3)}


def score(resolved: Resolved, generation: Generation, judged: Judged, *, with_feedback: bool = True) -> Scored:
    outcome = apply_policies(resolved.task, generation, judged.outcome)
    return Scored(
        generation=generation, outcome=outcome, reward=outcome.reward(resolved.task),
        components={c.name: {"value": c.value, "hard": c.hard} for c in outcome.components},
        feedback=resolved.feedback(outcome, generation.text) if with_feedback else {},
        flag_evidence=outcome.flag_map(),
        masked=is_masked(resolved.task, generation, outcome.verdict.value),
        duration_ms=judged.duration_ms,
    )


def score_groups(groups: list[ResolvedGroup],
                 judged: list[list[Judged] | GroupError]) -> list[list[Scored] | GroupError]:
    return [verdicts if isinstance(verdicts, GroupError) else
            [score(group.resolved, gen, j) for gen, j in zip(group.generations, verdicts, strict=True)]
            for group, verdicts in zip(groups, judged, strict=True)]
