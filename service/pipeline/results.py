"""The one mapper between a decision and what records and callers get.

- `record_of`: a scored response -> its audit record (`RecordRow`).
- `result_of`: a record -> the caller's result (`VerifyResult`, with its signed receipt, in
  the view chosen for the caller: service/views.py).
- `record_out`: a record -> the auditor's view of it (`RecordOut`, the records API).

`result_of` and `record_out` read the same decision fields (`_decision`), so the two views
cannot drift apart.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import configure_mappers

from service import views
from service.advantages import GroupStats
from service.pipeline.resolve import Resolved
from service.pipeline.score import Scored
from service.schemas import ComponentOut, GroupError, GroupResult, GroupSpec, RecordOut, RunTag, VerifyResult
from service.signing import Signer
from service.tables import RecordRow, new_record_id
from verifiers import registry
from verifiers.base import sha256_text


@dataclass(frozen=True)
class Placement:
    """Where a record sits: its request, group and submission (request id, response index)."""

    submission: tuple[str, int]  # unique in the store: no response of a request is ever logged twice
    request_id: str | None = None
    group_id: str | None = None
    group_index: int | None = None
    eval_id: str | None = None
    run: RunTag | None = None


def record_of(resolved: Resolved, scored: Scored, caller_key_id: str | None, backend: str, at: Placement,
              retain_response: bool, stats: GroupStats | None = None, index: int = 0) -> RecordRow:
    response = scored.generation.text
    return _new_record(
        id=new_record_id(),
        created_at=datetime.now(UTC),  # before the receipt is signed, which names the time
        request_id=at.request_id,
        caller_key_id=caller_key_id,
        task_id=resolved.task_id,
        task_hash=resolved.task_hash,
        task_public=resolved.public,
        verifier=resolved.verifier.name,
        verifier_version=resolved.verifier.version,
        response_hash=sha256_text(response),
        response=response if retain_response else None,
        components=scored.components,
        reward=scored.reward,
        verdict=scored.verdict,
        evidence=scored.outcome.evidence,
        feedback=scored.feedback,
        flags=scored.flags,
        flag_evidence=scored.flag_evidence,
        sandbox_backend=backend,
        usage=scored.outcome.usage,
        duration_ms=round(scored.duration_ms, 3),
        group_id=at.group_id,
        group_index=at.group_index,
        submission_id=at.submission[0],
        submission_index=at.submission[1],
        tokens=scored.generation.tokens,
        finish_reason=scored.generation.finish_reason,
        masked=scored.masked,
        eval_id=at.eval_id,
        run_id=at.run.id if at.run else None,
        run_step=at.run.step if at.run else None,
        # the record keeps what the caller was told about its group (the viewer shows it)
        **({} if stats is None else dict(advantage=stats.advantages[index], group_mean=stats.mean,
                                         group_std=stats.std, group_zero_variance=stats.zero_variance)),
    )


_RECORDS = RecordRow._sa_class_manager  # type: ignore[attr-defined]


def _new_record(**values: Any) -> RecordRow:
    """A RecordRow holding `values`, as `RecordRow(**values)` makes it but without the ORM's
    per-attribute change events (about 45 of them a record, a third of the cost of building
    one): the pipeline's records never go through an ORM session; the record writer inserts
    what they hold with Core (service/record_writer.py). Reading attributes works as usual."""
    global _configured
    if not _configured:  # what the first `RecordRow(...)` would do: set up the ORM's attributes
        configure_mappers()
        _configured = True
    row = _RECORDS.new_instance()
    row.__dict__.update(values)
    return row


_configured = False


def _decision(row: RecordRow) -> dict[str, Any]:
    return dict(verifier=row.verifier, verifier_version=row.verifier_version, reward=row.reward,
                verdict=row.verdict, components={k: ComponentOut(**v) for k, v in row.components.items()},
                evidence=row.evidence, flags=row.flags or [], flag_evidence=row.flag_evidence or {},
                duration_ms=row.duration_ms, task_id=row.task_id, task_hash=row.task_hash,
                request_id=row.request_id, tokens=row.tokens, finish_reason=row.finish_reason,
                masked=bool(row.masked))


def result_of(signer: Signer | None, row: RecordRow, view: views.View = "full",
              task_sent: str | None = None) -> VerifyResult:
    """A record as a result, with its signed receipt (binding `task_sent`, the request's task), in the
    view chosen for the caller."""
    result = VerifyResult(receipt=None if signer is None else signer.receipt(row, task_sent), record_id=row.id,
                          feedback=row.feedback or {}, **_decision(row))
    return views.shown(result, view, registry.get(row.verifier).hidden_flags)


def record_out(row: RecordRow) -> RecordOut:
    """A stored record as the records API shows it."""
    return RecordOut(
        id=row.id, seq=row.seq, created_at=row.created_at, caller_key_id=row.caller_key_id, task=row.task_public,
        response_hash=row.response_hash, response=row.response, feedback=row.feedback,
        sandbox_backend=row.sandbox_backend, usage=row.usage, group_id=row.group_id, group_index=row.group_index,
        eval_id=row.eval_id,
        run=RunTag(id=row.run_id, step=row.run_step) if row.run_id is not None and row.run_step is not None else None,
        **_decision(row),
    )


def group_result(spec: GroupSpec, group_id: str, rows: list[RecordRow], results: list[VerifyResult],
                 stats: GroupStats) -> GroupResult:
    return GroupResult(group_id=group_id, results=results, rewards=[r.reward for r in rows],
                       advantages=stats.advantages, mean=stats.mean, std=stats.std,
                       zero_variance=stats.zero_variance, errors=sum(r.verdict == "error" for r in rows),
                       masked=sum(bool(r.masked) for r in rows))


def failed_group(spec: GroupSpec, error: GroupError) -> GroupResult:
    """A group whose task turned out invalid: no record, no reward, no advantage."""
    n = len(spec.responses)
    return GroupResult(group_id=spec.group_id or uuid.uuid4().hex, results=[], rewards=[None] * n,
                       advantages=[None] * n, mean=None, std=None, zero_variance=False, errors=n, error=error)
