"""Stage 6, persist: one audit record per response, the task blobs, and (for an
Idempotency-Key) the answer itself, written in one transaction before the caller is
answered; then the answer.

A concurrent repeat of the same request may win the race to the unique keys: its logged
answer is returned instead (an integrity error on `request_id` or the idempotency row).

Hook points for a batching writer (service/record_writer.py, group commit): every write of
the pipeline goes through `write()` below, and nothing else in the pipeline touches the store
for writing; `announce()` runs after the write is durable.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio

from service.advantages import GroupStats
from service.logs import log_verification
from service.pipeline.admit import Admitted, logged_single
from service.pipeline.resolve import ResolvedGroup
from service.pipeline.results import Placement, failed_group, group_result, record_of, result_of
from service.pipeline.score import Scored
from service.pipeline.work import Work
from service.schemas import GroupError, GroupResult, GroupsResponse
from service.store import is_integrity_error
from service.tables import IdempotencyRow, RecordRow, TaskBlobRow

if TYPE_CHECKING:
    from service.pipeline import Pipeline


def records(p: Pipeline, work: Work, groups: list[ResolvedGroup], scored: list[list[Scored] | GroupError],
            stats: list[GroupStats | None]) -> tuple[list[RecordRow], GroupsResponse]:
    """The records of a request and the answer made of them."""
    rows: list[RecordRow] = []
    out: list[GroupResult] = []
    submission_id = uuid.uuid4().hex
    for spec, group, decisions, group_stats in zip(work.groups, groups, scored, stats, strict=True):
        if isinstance(decisions, GroupError):
            out.append(failed_group(spec, decisions))
            continue
        group_id = None if work.single else spec.group_id or uuid.uuid4().hex
        group_rows = []
        for index, decision in enumerate(decisions):
            at = Placement((submission_id, len(rows) + index), request_id=work.request_id, group_id=group_id,
                           group_index=None if work.single else index, eval_id=work.eval_id, run=work.run)
            row = record_of(group.resolved, decision, work.caller.key_id, p.executor.backend, at,
                            p.settings.retention == "full", group_stats, index)
            p.metrics.verification(row.verifier, row.verdict, decision.duration_ms / 1000, row.flags, row.evidence)
            log_verification(row)
            group_rows.append(row)
        rows += group_rows
        results = [result_of(p.store.signer, r, group.view, group.sent) for r in group_rows]
        if group_stats is None:  # a single verification: its one result, no statistics
            out.append(GroupResult(group_id="", results=results, rewards=[results[0].reward], advantages=[None],
                                   mean=None, std=None, zero_variance=False, errors=0))
        else:
            out.append(group_result(spec, group_id or "", group_rows, results, group_stats))
    return rows, GroupsResponse(groups=out)


async def persist(p: Pipeline, work: Work, admitted: Admitted, groups: list[ResolvedGroup],
                  rows: list[RecordRow], answer: GroupsResponse) -> GroupsResponse:
    used = [g.resolved.blob() for g, result in zip(groups, answer.groups, strict=True) if result.error is None]
    idem = None
    if work.idempotency_key is not None:
        idem = IdempotencyRow(caller_key_id=work.caller.key_id, key=work.idempotency_key,
                              request_hash=admitted.body_hash, response=answer.model_dump(mode="json"))
    try:
        await write(p, rows, used, idem)
    except Exception as exc:
        if not is_integrity_error(exc):
            raise
        won = await _repeat_that_won(p, work, admitted, groups)
        if won is None:
            raise
        return won
    announce(p, rows)
    return answer


async def write(p: Pipeline, rows: list[RecordRow], blobs: list[TaskBlobRow], idem: IdempotencyRow | None) -> None:
    """The pipeline's one write: records, task blobs and the idempotency row, committed by the
    store's group-commit writer (service/record_writer.py) together with those of the other
    requests in flight; it returns once this request's rows are durable."""
    await p.store.append_async(rows, blobs, idem)


def announce(p: Pipeline, rows: list[RecordRow]) -> None:
    """Tell the watchers (runs' alarms) about records once they are logged."""
    if p.on_logged is not None and rows:
        p.on_logged(rows)


async def _repeat_that_won(p: Pipeline, work: Work, admitted: Admitted,
                           groups: list[ResolvedGroup]) -> GroupsResponse | None:
    """After an integrity error: the answer of a concurrent repeat that was logged first, if any."""
    if work.single and work.request_id is not None:
        row = await anyio.to_thread.run_sync(p.store.record_by_request, work.caller.key_id, work.request_id)
        return None if row is None else logged_single(p, row, groups[0])
    if work.idempotency_key is not None:
        stored = await anyio.to_thread.run_sync(p.store.idempotent_response, work.caller.key_id,
                                                work.idempotency_key, admitted.body_hash)
        return None if stored is None else GroupsResponse.model_validate(stored)
    return None
