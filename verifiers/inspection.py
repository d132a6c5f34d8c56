"""What every verifier family shares after judging: generation facts and flag policies.

A detector only *names* a pattern (a flag with evidence); whether the pattern costs the
response its reward is the task's decision:

- `flag_policy` maps a flag name to `"flag"` (information only: the default for every
  flag) or `"fail"` (a hard failure: `compliance` fails, the reward is the task's
  failure value, and a `correct` verdict becomes `violation`; the raw `correctness`
  component is kept so that statistics still see what the answer was worth);
- `truncation` decides for a response whose generation hit its length limit
  (`finish_reason == "length"`, flagged `truncated`): `score` (default) judges it as it
  is, `fail` treats `truncated` as a failing flag, `mask` leaves it out of the group
  statistics (advantage null), like an `error`.

`error` verdicts are infrastructure failures: no policy applies to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifiers.base import Component, Outcome, TaskBase, Verdict, flag, hard

TRUNCATED = "truncated"
LENGTH_FINISH = "length"


@dataclass(frozen=True)
class Generation:
    """What the trainer knows about how a response was generated (all optional)."""

    text: str
    tokens: int | None = None
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == LENGTH_FINISH


def failing_flags(task: TaskBase, flags: dict[str, Any]) -> list[str]:
    """The flags this task promotes to a hard failure."""
    policy = dict(task.flag_policy)
    if task.truncation == "fail":
        policy.setdefault(TRUNCATED, "fail")
    return sorted(name for name in flags if policy.get(name) == "fail")


def is_masked(task: TaskBase, generation: Generation, verdict: str) -> bool:
    """Left out of the group statistics by the task's truncation policy."""
    return task.truncation == "mask" and generation.truncated and verdict != Verdict.error.value


def apply_policies(task: TaskBase, generation: Generation, outcome: Outcome) -> Outcome:
    """Add the generation's own flags and apply the task's flag policy (records are
    written from the result, so this runs once, before the record exists)."""
    if outcome.verdict is Verdict.error:
        return outcome
    if generation.truncated:
        outcome.add_flags([flag(TRUNCATED, finish_reason=generation.finish_reason, tokens=generation.tokens,
                                policy=task.truncation)])
    failed = failing_flags(task, outcome.flag_map())
    if not failed:
        return outcome
    components: list[Component] = [c for c in outcome.components if c.name != "compliance"]
    components.append(hard("compliance", False))
    verdict = Verdict.violation if outcome.verdict is Verdict.correct else outcome.verdict
    evidence = {**outcome.evidence, "failed_by_flag_policy": failed}
    return Outcome(verdict, components, evidence, list(outcome.flags), outcome.usage)
