"""Human review: labels on records, a stratified review queue, and a summary of each
verifier's error rates estimated from the labels."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends, Query

from service.auth import Caller, require_scope
from service.deps import SettingsDep, StoreDep
from service.errors import LabelLimit, RecordNotFound, responses
from service.inspection_schemas import LabelIn, LabelOut, QueueItem, ReviewQueue, ReviewSummary
from service.pipeline.results import record_out
from service.review import add_label, record_labels, review_queue, review_summary

router = APIRouter(prefix="/v1", tags=["review"])
_errors = responses(RecordNotFound, LabelLimit)
ReviewCaller = Depends(require_scope("review"))


@router.post("/records/{record_id}/labels", response_model=LabelOut, status_code=201, responses=_errors)
async def label_record(record_id: str, body: LabelIn, store: StoreDep, settings: SettingsDep,
                       caller: Caller = ReviewCaller) -> LabelOut:
    """Add a label (append-only: a later label supersedes, the history stays)."""
    return await anyio.to_thread.run_sync(add_label, store, record_id, body, caller,
                                          settings.max_labels_per_record)


@router.get("/records/{record_id}/labels", response_model=list[LabelOut], responses=_errors)
async def labels_of(record_id: str, store: StoreDep, _: Caller = ReviewCaller) -> list[LabelOut]:
    """A record's labels, oldest first."""
    return await anyio.to_thread.run_sync(record_labels, store, record_id)


@router.get("/review/queue", response_model=ReviewQueue, responses=_errors)
async def queue(store: StoreDep, verifier: str | None = None,
                flag: str | None = Query(None, description="Only this flag counts as `flagged`."),
                n: int = Query(30, ge=1, le=500),
                seed: int | None = Query(None, description="Fix the sample (same records, same seed)."),
                _: Caller = ReviewCaller) -> ReviewQueue:
    """Unlabelled records to review: flagged, correct-unflagged and incorrect, in equal shares."""
    picked, available = await anyio.to_thread.run_sync(
        lambda: review_queue(store, verifier, flag, n, seed))
    return ReviewQueue(items=[QueueItem(stratum=s, record=record_out(row)) for s, row in picked],
                       available=available)


@router.get("/review/summary", response_model=ReviewSummary, responses=_errors)
async def summary(store: StoreDep, verifier: str | None = None, _: Caller = ReviewCaller) -> ReviewSummary:
    """Per verifier: false-positive rate of `correct`, false-negative rate of `incorrect`
    (Wilson 95% intervals), and the share of flagged records confirmed as exploits."""
    return await anyio.to_thread.run_sync(review_summary, store, verifier)
