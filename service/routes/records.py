"""The audit trail: list, fetch, export and replay records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from service.audit_export import export_lines
from service.auth import Caller
from service.deps import AuditCaller, PipelineDep, StoreDep
from service.errors import RecordNotFound, RequestInvalid, responses
from service.pipeline.results import record_out
from service.schemas import RecordOut, RecordPage, ReplayOut
from verifiers.base import Verdict

router = APIRouter(prefix="/v1/records", tags=["audit"])
MAX_SEQ = 2**63 - 1  # a record's seq is a 64-bit integer in both databases


class RecordFilters:
    def __init__(self, verifier: str | None = None, verdict: Verdict | None = None,
                 group_id: str | None = Query(None, description="A group id in the namespace of `caller_key_id` "
                                                                "(default: the calling key's own groups)."),
                 caller_key_id: str | None = Query(None, description="Records of this API key id."),
                 task_id: str | None = None, task_hash: str | None = None,
                 flag: str | None = Query(None, description="Only records carrying this flag (suspected hacks)."),
                 since: datetime | None = None, until: datetime | None = None) -> None:
        self.values = {"verifier": verifier, "verdict": verdict, "group_id": group_id, "task_id": task_id,
                       "task_hash": task_hash, "flag": flag, "since": since, "until": until,
                       "caller_key_id": caller_key_id}

    def scoped(self, caller: Caller) -> dict[str, Any]:
        """Group ids live in the namespace of the key that sent them: the same id from two
        keys is two groups. Without `caller_key_id`, a group id is the calling key's."""
        if self.values["group_id"] is not None and self.values["caller_key_id"] is None:
            return {**self.values, "caller_key_id": caller.key_id}
        return self.values


# Routes that read the store are plain functions: FastAPI runs them on its thread pool,
# so a database call never holds the event loop.
@router.get("", response_model=RecordPage)
def list_records(store: StoreDep, caller: AuditCaller, filters: RecordFilters = Depends(),
                 after: int | None = Query(None, ge=0, le=MAX_SEQ,
                                           description="Cursor: `next_cursor` of the previous page."),
                 limit: int = Query(100, ge=1, le=1000)) -> RecordPage:
    """Records in write order, filtered and paginated."""
    rows = store.query(after_seq=after, limit=limit, **filters.scoped(caller))
    return RecordPage(records=[record_out(r) for r in rows],
                      next_cursor=rows[-1].seq if len(rows) == limit else None)


@router.get("/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}, "description": "One record per line."}})
async def export_records(store: StoreDep, caller: AuditCaller, filters: RecordFilters = Depends()) -> StreamingResponse:
    """All matching records as JSON Lines."""
    values = filters.scoped(caller)

    # A sync iterator: Starlette pulls it on a worker thread, so the store's reads stay off the
    # event loop; lines go out in chunks (service/audit_export.py).
    return StreamingResponse(export_lines(store, values), media_type="application/x-ndjson")


@router.get("/{record_id}", response_model=RecordOut, responses=responses(RecordNotFound))
def get_record(record_id: str, store: StoreDep, _: AuditCaller) -> RecordOut:
    row = store.record(record_id)
    if row is None:
        raise RecordNotFound(f"record {record_id!r} not found")
    return record_out(row)


@router.post("/{record_id}/replay", response_model=ReplayOut, responses=responses(RecordNotFound, RequestInvalid))
async def replay(record_id: str, pipeline: PipelineDep, _: AuditCaller) -> ReplayOut:
    """Re-run the logged inputs through the verifier; say whether the verdict is the same."""
    return await pipeline.replay(record_id)
