"""Held-out evaluation runs: verify task families exactly like groups (records tagged
with the run's id), then report and compare them from the records."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio

from assay_rules.canonical import eval_report_digest, task_sent
from service.auth import Caller
from service.errors import EvalNotFound, TaskNotFound
from service.eval_metrics import Vote, bootstrap_difference, maj_at_k, mean, pass_at_k
from service.inspection_schemas import (
    Difference,
    EvalComparison,
    EvalIn,
    EvalOut,
    EvalReport,
    FamilyComparison,
    TokenBucket,
)
from service.packing import check_fits, pack
from service.pipeline import Pipeline
from service.pipeline.resolve import resolve
from service.schemas import AdvantageOptions, GroupsRequest, Receipt
from service.signing import utc_iso
from service.store import AuditStore
from service.tables import EvalRow, RecordRow
from verifiers.math.detectors import FALSE_STEP

# Upper edges of the token buckets of accuracy_by_tokens (a last bucket takes the rest).
TOKEN_EDGES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# Evidence keys that hold a response's extracted, normalised answer (math first).
ANSWER_KEYS = ("answer_normalised", "extracted")


@dataclass
class TaskSample:
    """One task's responses in an evaluation run."""

    key: str
    rows: list[RecordRow] = field(default_factory=list)

    @property
    def judged(self) -> list[RecordRow]:
        return [r for r in self.rows if r.verdict != "error"]


async def run_eval(pipeline: Pipeline, body: EvalIn, caller: Caller) -> EvalOut:
    """Every task is resolved and the work packed before anything runs (in a worker thread:
    registered tasks are read from the store), so a bad task is a 4xx and logs nothing; then
    each pack goes through the pipeline; then the report is read from the records."""
    eval_id = uuid.uuid4().hex
    plan = await anyio.to_thread.run_sync(_plan, pipeline, body)
    layout: dict[str, list[str]] = {}
    for family, requests in plan:
        group_ids = layout.setdefault(family, [])
        for request in requests:
            answer = await pipeline.groups(request, caller, eval_id=eval_id)
            group_ids += [g.group_id for g in answer.groups]
    row = EvalRow(id=eval_id, name=body.name, checkpoint=body.checkpoint, caller_key_id=caller.key_id, layout=layout)
    await anyio.to_thread.run_sync(pipeline.store.add_eval, row)
    report = await anyio.to_thread.run_sync(eval_report, pipeline.store, eval_id)
    return signed_report(pipeline.store, report, {family: [task_sent(s.verifier, s.task, s.task_id) for s in specs]
                                                  for family, specs in body.families.items()})


def signed_report(store: AuditStore, report: EvalOut, sent: dict[str, list[str]]) -> EvalOut:
    """The report with the service's signature over its figures, its records and the tasks the
    request named: its receipts alone vouch for each record, not for the figures made of them,
    so a proxy could have changed pass@k or mean reward, or answered with another run's report."""
    if store.signer is None:
        return report
    payload = {"eval_id": report.id, "name": report.name, "checkpoint": report.checkpoint,
               "report": eval_report_digest(report.model_dump(mode="json")),
               "records": [r.payload["record_id"] for r in report.receipts], "task_sent": sent,
               "time": utc_iso(datetime.now(UTC))}
    return report.model_copy(update={"signed": Receipt.model_validate(store.signer.signed(payload))})


def _plan(pipeline: Pipeline, body: EvalIn) -> list[tuple[str, list[GroupsRequest]]]:
    """Per family, its groups packed into requests within the service's limits. Blocking."""
    settings = pipeline.settings
    for family, specs in body.families.items():
        check_fits([(f"families.{family}[{i}].responses", len(spec.responses)) for i, spec in enumerate(specs)],
                   settings.max_inflight_responses)
    for family, specs in body.families.items():
        for index, spec in enumerate(specs):
            try:
                resolve(pipeline, spec)
            except TaskNotFound as exc:
                raise TaskNotFound(f"families.{family}[{index}].task_id: {exc}") from None
    plan = []
    for family, specs in body.families.items():
        requests = []
        for indices in pack([len(spec.responses) for spec in specs], settings.max_groups,
                            settings.max_inflight_responses):
            chunk = [specs[i].model_copy(update={"group_id": uuid.uuid4().hex}) for i in indices]
            requests.append(GroupsRequest.model_construct(groups=chunk, advantage=AdvantageOptions(), run=body.run))
        plan.append((family, requests))
    return plan


def _samples(store: AuditStore, run: EvalRow) -> dict[str, list[TaskSample]]:
    rows = list(store.iter_all(eval_id=run.id))
    by_group: dict[str, TaskSample] = {}
    for row in rows:
        sample = by_group.setdefault(row.group_id or row.id, TaskSample(row.task_id or row.task_hash))
        sample.rows.append(row)
    return {family: [by_group[g] for g in group_ids if g in by_group] for family, group_ids in run.layout.items()}


def eval_report(store: AuditStore, eval_id: str) -> EvalOut:
    run = store.eval_run(eval_id)
    if run is None:
        raise EvalNotFound(f"evaluation {eval_id!r} not found")
    families = _samples(store, run)
    everything = [t for tasks in families.values() for t in tasks]
    # The records' receipts in write order (the order the run's results were made), where the store can sign.
    receipts = [] if store.signer is None else [store.signer.receipt(r) for r in store.iter_all(eval_id=run.id)]
    return EvalOut(id=run.id, name=run.name, checkpoint=run.checkpoint, created_at=run.created_at,
                   families={name: report(tasks) for name, tasks in families.items()}, overall=report(everything),
                   receipts=receipts)


def answer_of(row: RecordRow) -> str | None:
    """The response's vote in maj@k: its normalised answer, else (code, SQL) its text's hash."""
    if row.verdict == "invalid_format":
        return None
    for key in ANSWER_KEYS:
        value = (row.evidence or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return row.response_hash


def _ks(tasks: Sequence[TaskSample]) -> range:
    sizes = [len(t.judged) for t in tasks if t.judged]
    return range(1, min(sizes) + 1) if sizes else range(0)


def task_pass_at_k(task: TaskSample, k: int) -> float:
    judged = task.judged
    return pass_at_k(len(judged), sum(r.verdict == "correct" for r in judged), k) if judged else 0.0


def task_maj_at_k(task: TaskSample, k: int) -> float:
    judged = task.judged
    return maj_at_k([Vote(answer_of(r), r.verdict == "correct") for r in judged], k) if judged else 0.0


def _share(rows: Sequence[RecordRow], test) -> float | None:  # type: ignore[no-untyped-def]
    return sum(1 for r in rows if test(r)) / len(rows) if rows else None


def report(tasks: Sequence[TaskSample]) -> EvalReport:
    rows = [r for t in tasks for r in t.rows]
    judged = [r for r in rows if r.verdict != "error"]
    ks = _ks(tasks)
    counted = [t for t in tasks if t.judged]
    correct = [r for r in judged if r.verdict == "correct"]
    flags = sorted({f for r in rows for f in (r.flags or [])})
    return EvalReport(
        n_tasks=len(tasks), n_responses=len(rows),
        pass_at_k={str(k): sum(task_pass_at_k(t, k) for t in counted) / len(counted) for k in ks},
        maj_at_k={str(k): sum(task_maj_at_k(t, k) for t in counted) / len(counted) for k in ks},
        mean_reward=mean([r.reward for r in judged]),
        mean_tokens=mean([float(r.tokens) for r in rows if r.tokens is not None]),
        accuracy_by_tokens=_by_tokens(judged),
        truncation_rate=_share(rows, lambda r: r.finish_reason == "length"),
        error_rate=_share(rows, lambda r: r.verdict == "error"),
        flag_rates={f: sum(1 for r in rows if f in (r.flags or [])) / len(rows) for f in flags},
        false_step_rate_among_correct=_share(correct, lambda r: FALSE_STEP in (r.flags or [])),
    )


def _by_tokens(rows: Sequence[RecordRow]) -> list[TokenBucket]:
    buckets: dict[int, list[bool]] = {}
    longest = max((r.tokens for r in rows if r.tokens is not None), default=0)
    for row in rows:
        if row.tokens is not None:
            # Past the last edge, one open bucket up to the longest response.
            edge = next((e for e in TOKEN_EDGES if row.tokens <= e), longest)
            buckets.setdefault(edge, []).append(row.verdict == "correct")
    return [TokenBucket(max_tokens=e, n=len(v), accuracy=sum(v) / len(v)) for e, v in sorted(buckets.items())]


def _per_task(tasks: Sequence[TaskSample], ks: range) -> dict[str, list[float]]:
    counted = [t for t in tasks if t.judged]
    out: dict[str, list[float]] = {}
    for k in ks:
        out[f"pass@{k}"] = [task_pass_at_k(t, k) for t in counted]
        out[f"maj@{k}"] = [task_maj_at_k(t, k) for t in counted]
    out["mean_reward"] = [sum(r.reward for r in t.judged) / len(t.judged) for t in counted]
    return out


def _compare_tasks(a: Sequence[TaskSample], b: Sequence[TaskSample]) -> FamilyComparison:
    a_keys, b_keys = [t.key for t in a if t.judged], [t.key for t in b if t.judged]
    paired = sorted(a_keys) == sorted(b_keys) and len(set(a_keys)) == len(a_keys)
    if paired:  # line the tasks up so that each resample draws the same tasks from both runs
        b = sorted(b, key=lambda t: a_keys.index(t.key) if t.key in a_keys else len(a_keys))
        a = sorted(a, key=lambda t: a_keys.index(t.key) if t.key in a_keys else len(a_keys))
    ka, kb = _ks(a), _ks(b)
    ks = range(1, min(len(ka), len(kb)) + 1)
    va, vb = _per_task(a, ks), _per_task(b, ks)
    metrics = {}
    for name in va:
        ma, mb = mean(va[name]), mean(vb[name])
        metrics[name] = Difference(a=ma, b=mb, diff=None if ma is None or mb is None else mb - ma,
                                   interval=bootstrap_difference(va[name], vb[name], paired))
    return FamilyComparison(n_tasks_a=len(a), n_tasks_b=len(b), paired=paired, metrics=metrics)


def compare(store: AuditStore, a_id: str, b_id: str) -> EvalComparison:
    runs = []
    for eval_id in (a_id, b_id):
        run = store.eval_run(eval_id)
        if run is None:
            raise EvalNotFound(f"evaluation {eval_id!r} not found")
        runs.append(_samples(store, run))
    a, b = runs
    families = {name: _compare_tasks(a[name], b[name]) for name in sorted(set(a) & set(b))}
    overall = _compare_tasks([t for ts in a.values() for t in ts], [t for ts in b.values() for t in ts])
    return EvalComparison(a=a_id, b=b_id, families=families, overall=overall)
