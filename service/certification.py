"""Task certification: before a task trains anything, its reference must earn the full reward
on every run (same verdict each time, well inside the task's time), and every probe of its
family (empty answers, exits, constants, hedges, reads without writes...) must earn nothing.

The verdict on the task is a certificate, appended to the store and never changed: the newest
one per task hash counts. Certification goes through the same resolve, admission and executor
as `/v1/groups`, but writes no records: probes are not training data.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio

from service.auth import Caller
from service.certification_schemas import (
    CertificateOut,
    CertifyItem,
    CertifyRequest,
    CertifyResponse,
    ProbeResult,
    ReferenceRun,
)
from service.errors import TaskNotFound
from service.pipeline import Pipeline
from service.pipeline.judge import gather_or_abort, job_for
from service.pipeline.resolve import Resolved, caller_facing, resolve, task_error_at
from service.pipeline.score import score
from service.store import AuditStore
from service.tables import CertificateRow, VerifierDiffRow
from verifiers.base import Probe, TaskInvalid, Verdict
from verifiers.inspection import Generation

# The reference must finish within this share of the time the task allows one response.
TIME_SHARE = 0.5
REWARD_EPS = 1e-6


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reward: float
    duration_ms: float
    # The response's own run time where the verifier measured it (code: the candidate's wall time
    # over its tests), else the whole judging call's.
    seconds: float


class Certifier:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    async def certify(self, req: CertifyRequest, caller: Caller) -> CertifyResponse:
        resolved = await anyio.to_thread.run_sync(self._resolve_all, req.tasks)
        calls = [self._certify_call(item, res, req.runs, caller) for item, res in zip(req.tasks, resolved, strict=True)]
        rows = await gather_or_abort(calls)
        await anyio.to_thread.run_sync(self._store_all, rows)
        out = [certificate_out(row) for row in rows]
        certified = sum(c.status == "certified" for c in out)
        return CertifyResponse(certificates=out, certified=certified, quarantined=len(out) - certified)

    def _resolve_all(self, items: list[CertifyItem]) -> list[Resolved]:
        """A task that cannot even be resolved rejects the request, naming it (as /v1/groups does)."""
        out = []
        for i, item in enumerate(items):
            try:
                out.append(resolve(self.pipeline, item, certified_only=False))
            except TaskInvalid as exc:
                raise task_error_at(exc, f"tasks[{i}]") from None
            except TaskNotFound as exc:
                raise TaskNotFound(f"tasks[{i}].task_id: {exc}") from None
        return out

    def _store_all(self, rows: list[CertificateRow]) -> None:
        for row in rows:
            self.pipeline.store.add_certificate(row)

    def _certify_call(self, item: CertifyItem, resolved: Resolved, runs: int,
                      caller: Caller) -> Callable[[], Awaitable[CertificateRow]]:
        async def run() -> CertificateRow:
            return await self.certify_one(resolved, item.reference, runs, caller)
        return run

    async def certify_one(self, resolved: Resolved, supplied: str | None, runs: int,
                          caller: Caller) -> CertificateRow:
        verifier, task = resolved.verifier, resolved.task
        reasons: list[str] = []
        reference = verifier.reference(task, supplied)
        probes = verifier.probes(task, reference)
        reference_runs: list[Judgement] = []
        probe_results: list[ProbeResult] = []
        try:
            excused = await self._excused(resolved, reference, probes)
            live = [p for p in probes if p.name not in excused]
            # The first run shares a call with the probes (and pays any warm-up); each further run is a
            # call of its own, timed alone: those say how long the reference takes and whether it is stable.
            first = [reference] if reference is not None else []
            judged = await self._check(resolved, first + [p.response for p in live])
            if reference is not None:
                reference_runs = judged[:1]
                for _ in range(runs - 1):
                    reference_runs += await self._check(resolved, [reference])
                judged = judged[1:]
        except TaskInvalid as exc:
            shown = caller_facing(resolved, exc)
            return self._row(resolved, ["task_invalid: " + str(shown)], [], [], caller)
        if reference is None:
            reasons.append(f"no_reference: the {verifier.name} family needs a `reference` for this task")
        else:
            reasons += reference_problems(reference_runs, verifier.time_budget_s(task))
        for probe, result in zip(live, judged, strict=True):
            probe_results.append(ProbeResult(name=probe.name, verdict=result.verdict, reward=result.reward))
            if result.verdict is Verdict.error:
                reasons.append(f"probe_error: {probe.name} could not be judged (infrastructure); certify again")
            elif result.verdict is Verdict.correct or result.reward > task.failure_value + REWARD_EPS:
                reasons.append(f"probe_rewarded: {probe.name} earned {result.reward:g} ({result.verdict.value})")
        probe_results += [ProbeResult(name=name, verdict=None, reward=None, excused=True) for name in excused]
        return self._row(resolved, reasons, reference_runs, probe_results, caller)

    async def _excused(self, resolved: Resolved, reference: str | None, probes: list[Probe]) -> list[str]:
        """Probes that state the gold itself: the reference passes under the probe's own task."""
        if reference is None:
            return []
        out = []
        for probe in probes:
            if probe.excused_if_reference_passes is None:
                continue
            try:
                twin = resolved.verifier.parse_task(probe.excused_if_reference_passes)
            except TaskInvalid:
                continue
            twin_resolved = Resolved(resolved.verifier, twin, None, twin.task_hash(), probe.excused_if_reference_passes)
            if (await self._check(twin_resolved, [reference]))[0].verdict is Verdict.correct:
                out.append(probe.name)
        return out

    async def _check(self, resolved: Resolved, responses: list[str]) -> list[Judgement]:
        if not responses:
            return []
        with self.pipeline.budget.hold(len(responses)):
            judged = await self.pipeline.executor.run(job_for(resolved, responses))
        out = []
        for response, one in zip(responses, judged, strict=True):
            decision = score(resolved, Generation(response), one, with_feedback=False)
            measured = (decision.outcome.usage or {}).get("wall_s")
            seconds = float(measured) if isinstance(measured, int | float) else one.duration_ms / 1000
            out.append(Judgement(decision.outcome.verdict, decision.reward, one.duration_ms, seconds))
        return out

    @staticmethod
    def _row(resolved: Resolved, reasons: list[str], reference_runs: list[Judgement],
             probes: list[ProbeResult], caller: Caller) -> CertificateRow:
        return CertificateRow(
            id=uuid.uuid4().hex, created_at=datetime.now(UTC), task_hash=resolved.task_hash, task_id=resolved.task_id,
            verifier=resolved.verifier.name, verifier_version=resolved.verifier.version,
            status="quarantined" if reasons else "certified", reasons=reasons,
            reference_runs=[{"verdict": r.verdict.value, "reward": r.reward, "duration_ms": round(r.duration_ms, 3)}
                            for r in reference_runs],
            probes=[p.model_dump(mode="json") for p in probes], caller_key_id=caller.key_id,
            counts=resolved.task_id is None or "admin" in caller.scopes)


def reference_problems(runs: list[Judgement], budget_s: float | None) -> list[str]:
    """Why the reference's runs do not certify the task (none when they do)."""
    reasons = []
    verdicts = {r.verdict for r in runs}
    if len(verdicts) > 1 or len({round(r.reward, 6) for r in runs}) > 1:
        seen = ", ".join(sorted(v.value for v in verdicts))
        reasons.append(f"flaky: the reference got different results on {len(runs)} runs ({seen})")
    if Verdict.error in verdicts:
        reasons.append("reference_error: the reference could not be judged (infrastructure); certify again")
    elif verdicts != {Verdict.correct}:
        reasons.append("reference_failed: the reference did not earn the reward ("
                       + ", ".join(sorted(v.value for v in verdicts)) + ")")
    # The fastest run: waiting for a worker (or its warm-up) only ever adds to a run's time.
    fastest = min((r.seconds for r in runs), default=0.0)
    if budget_s is not None and fastest > TIME_SHARE * budget_s:
        reasons.append(f"slow_reference: the reference took {fastest:.2f} s of the {budget_s:g} s the task allows "
                       f"(at most {TIME_SHARE:.0%})")
    return reasons


def certificate_out(row: CertificateRow) -> CertificateOut:
    return CertificateOut(
        id=row.id, created_at=row.created_at, task_id=row.task_id, task_hash=row.task_hash, verifier=row.verifier,
        verifier_version=row.verifier_version, status=row.status, reasons=list(row.reasons),  # type: ignore[arg-type]
        reference_runs=[ReferenceRun(**r) for r in row.reference_runs],
        probes=[ProbeResult(**p) for p in row.probes], counts=row.counts)


def latest_certificate(store: AuditStore, task_hash: str) -> dict[str, Any] | None:
    """The newest certificate of a task, as `GET /v1/tasks/{id}` shows it."""
    row = store.latest_certificates([task_hash]).get(task_hash)
    return certificate_out(row).model_dump(mode="json") if row is not None else None


def diff_summary(row: VerifierDiffRow | None) -> dict[str, Any] | None:
    """What `GET /v1/verifiers` shows of a verifier's newest release-gate report."""
    if row is None:
        return None
    keys = ("id", "created_at", "verifier_version", "replayed", "verdict_flips", "reward_flips", "reward_flip_rate")
    return {k: row.report.get(k) for k in keys}
