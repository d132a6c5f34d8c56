"""Curriculum signals per task, from the audit records: attempts, pass rate of the raw
correctness, share of zero-variance groups, mean tokens and a difficulty band.

Raw correctness is the `correctness` component as the verifier judged it, before flag
policies and shaping; errors (infrastructure) are left out. Bands by pass rate:
`too_hard` <= 0.05 < `hard` < 0.3 <= `medium` <= 0.7 < `easy` < 0.95 <= `too_easy`;
`unseen` without a judged attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from assay_rules.variance import is_zero_variance
from service.inspection_schemas import Band, TaskStats
from service.store import AuditStore, RecordRow

BANDS: tuple[tuple[float, Band], ...] = ((0.05, "too_hard"), (0.3, "hard"), (0.7, "medium"), (0.95, "easy"))


def band_of(pass_rate: float | None) -> Band:
    if pass_rate is None:
        return "unseen"
    if pass_rate <= BANDS[0][0]:
        return "too_hard"
    if pass_rate < BANDS[1][0]:
        return "hard"
    if pass_rate <= BANDS[2][0]:
        return "medium"
    if pass_rate < BANDS[3][0]:
        return "easy"
    return "too_easy"


def raw_correctness(row: RecordRow) -> float | None:
    if row.verdict == "error":
        return None
    component = (row.components or {}).get("correctness") or {}
    return float(component.get("value", 0.0))


@dataclass
class _Tally:
    task_id: str | None
    task_hash: str
    verifier: str
    attempts: int = 0
    correctness: list[float] = field(default_factory=list)
    # Per group, by (caller key, group id): the same id from two keys is two groups.
    groups: dict[tuple[str | None, str], list[float | None]] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)

    def add(self, row: RecordRow) -> None:
        self.attempts += 1
        value = raw_correctness(row)
        if value is not None:
            self.correctness.append(value)
        if row.group_id is not None:
            self.groups.setdefault((row.caller_key_id, row.group_id), []).append(value)
        if row.tokens is not None:
            self.tokens.append(row.tokens)

    def stats(self) -> TaskStats:
        pass_rate = sum(self.correctness) / len(self.correctness) if self.correctness else None
        zero = [is_zero_variance(values) for values in self.groups.values()]
        return TaskStats(task_id=self.task_id, task_hash=self.task_hash, verifier=self.verifier,
                         attempts=self.attempts, pass_rate=pass_rate, groups=len(zero),
                         zero_variance_share=sum(zero) / len(zero) if zero else None,
                         mean_tokens=sum(self.tokens) / len(self.tokens) if self.tokens else None,
                         band=band_of(pass_rate))


def task_stats(store: AuditStore, *, task_id: str | None = None, task_hash: str | None = None,
               verifier: str | None = None, since: datetime | None = None, until: datetime | None = None,
               limit: int = 1000) -> list[TaskStats]:
    """Per task (registered id, else content hash), in order of first attempt."""
    tallies: dict[tuple[str | None, str], _Tally] = {}
    for row in store.iter_all(task_id=task_id, task_hash=task_hash, verifier=verifier, since=since, until=until):
        key = (row.task_id, row.task_hash)
        tally = tallies.get(key)
        if tally is None:
            if len(tallies) >= limit:
                continue
            tally = tallies[key] = _Tally(row.task_id, row.task_hash, row.verifier)
        tally.add(row)
    return [t.stats() for t in tallies.values()]
