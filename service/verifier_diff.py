"""The verifier release gate: replay a sample of logged records, stratified by verdict,
through the verifiers as they are now, and report what would flip.

Counts by (logged verdict -> replayed verdict), the rate of reward flips with a Wilson 95%
interval, and example record ids for each kind of change. A report is appended to the store
(`verifier_diffs`); `GET /v1/verifiers` shows each verifier's latest one beside its version.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio

from service.auth import Caller
from service.certification_schemas import DiffRequest, Transition, VerifierDiffOut
from service.pipeline import Pipeline
from service.pipeline.judge import gather_or_abort, job_for
from service.pipeline.resolve import Resolved
from service.pipeline.score import score
from service.review import wilson_interval
from service.tables import RecordRow, VerifierDiffRow
from verifiers import registry
from verifiers.base import TaskInvalid
from verifiers.inspection import Generation

# Each verdict's share of the sample: equal, so rare verdicts (violation, timeout) are seen.
STRATA = ("correct", "incorrect", "invalid_format", "violation", "timeout")
EXAMPLES = 5
REWARD_EPS = 1e-6


class VerifierDiff:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    async def run(self, verifier_name: str, req: DiffRequest, caller: Caller | None) -> VerifierDiffOut:
        verifier = registry.get(verifier_name)
        per_verdict = max(1, -(-req.sample // len(STRATA)))
        rows = await anyio.to_thread.run_sync(
            lambda: self.pipeline.store.sample_for_replay(verifier.name, per_verdict, req.since))
        rows = rows[:req.sample]
        by_task: dict[str, list[RecordRow]] = defaultdict(list)
        for row in rows:
            by_task[row.task_hash].append(row)
        outcomes: dict[str, tuple[str, float]] = {}
        await gather_or_abort([self._replay_task(task_hash, group, outcomes) for task_hash, group in by_task.items()])
        report = summarise(verifier.name, verifier.version, rows, outcomes)
        row = VerifierDiffRow(id=report.id, created_at=report.created_at, verifier=verifier.name,
                              verifier_version=verifier.version, report=report.model_dump(mode="json"),
                              caller_key_id=caller.key_id if caller else None)
        await anyio.to_thread.run_sync(self.pipeline.store.add_verifier_diff, row)
        return report

    def _replay_task(self, task_hash: str, rows: list[RecordRow],
                     outcomes: dict[str, tuple[str, float]]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            blob = await anyio.to_thread.run_sync(self.pipeline.store.task_blob, task_hash)
            if blob is None:
                outcomes.update((r.id, ("task_missing", float("nan"))) for r in rows)
                return
            verifier = registry.get(rows[0].verifier)
            try:
                task = verifier.parse_task(blob.task)
                resolved = Resolved(verifier, task, rows[0].task_id, task_hash, blob.task)
                responses = [r.response or "" for r in rows]
                with self.pipeline.budget.hold(len(rows)):
                    judged = await self.pipeline.executor.run(job_for(resolved, responses))
            except TaskInvalid:
                outcomes.update((r.id, ("task_invalid", float("nan"))) for r in rows)
                return
            for row, one in zip(rows, judged, strict=True):
                decision = score(resolved, Generation(row.response or "", row.tokens, row.finish_reason), one,
                                 with_feedback=False)
                outcomes[row.id] = (decision.verdict, decision.reward)
        return run


def summarise(verifier: str, version: str, rows: list[RecordRow],
              outcomes: dict[str, tuple[str, float]]) -> VerifierDiffOut:
    transitions: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    flipped: list[str] = []
    for row in rows:
        verdict, reward = outcomes[row.id]
        key = (row.verdict, verdict)
        transitions[key] += 1
        if verdict != row.verdict and len(examples[key]) < EXAMPLES:
            examples[key].append(row.id)
        if not abs(reward - row.reward) <= REWARD_EPS:  # NaN (no replay) counts as a flip
            flipped.append(row.id)
    n = len(rows)
    return VerifierDiffOut(
        id=uuid.uuid4().hex, created_at=datetime.now(UTC), verifier=verifier, verifier_version=version,
        logged_versions=dict(Counter(r.verifier_version for r in rows)), replayed=n,
        transitions=[Transition(logged=a, replayed=b, count=c, examples=examples[(a, b)])
                     for (a, b), c in sorted(transitions.items())],
        verdict_flips=sum(c for (a, b), c in transitions.items() if a != b),
        reward_flips=len(flipped), reward_flip_rate=len(flipped) / n if n else None,
        reward_flip_interval=wilson_interval(len(flipped), n), reward_flip_examples=flipped[:EXAMPLES])
