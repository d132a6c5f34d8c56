"""Streaming export of records as JSON Lines, at database speed (issue 27).

Each line is what `record_out(row).model_dump_json()` gives (the API's RecordOut, fields in
its order), built from plain rows fetched a keyset page at a time (PAGE rows, by `seq`), so
memory stays bounded by one page whatever the export's size. A row with a value the fast
path does not vouch for (a non-finite number) goes through the pydantic model as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import select

from service.pipeline.results import record_out
from service.store import AuditStore
from service.tables import RecordRow

PAGE = 2000
LINES_PER_CHUNK = 200
_COLUMNS = [RecordRow.seq, RecordRow.id, RecordRow.created_at, RecordRow.request_id, RecordRow.caller_key_id,
            RecordRow.task_id, RecordRow.task_hash, RecordRow.task_public, RecordRow.verifier,
            RecordRow.verifier_version, RecordRow.response_hash, RecordRow.response, RecordRow.components,
            RecordRow.reward, RecordRow.verdict, RecordRow.evidence, RecordRow.feedback, RecordRow.flags,
            RecordRow.flag_evidence, RecordRow.sandbox_backend, RecordRow.usage, RecordRow.duration_ms,
            RecordRow.group_id, RecordRow.group_index, RecordRow.tokens, RecordRow.finish_reason, RecordRow.masked,
            RecordRow.eval_id, RecordRow.run_id, RecordRow.run_step]
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def conditions(store: AuditStore, *, verifier: str | None = None, verdict: str | None = None,
               group_id: str | None = None, task_id: str | None = None, task_hash: str | None = None,
               flag: str | None = None, eval_id: str | None = None, caller_key_id: str | None = None,
               since: datetime | None = None, until: datetime | None = None) -> list[Any]:
    """The WHERE of `AuditStore.query` for these filters."""
    where: list[Any] = []
    for column, value in ((RecordRow.verifier, verifier), (RecordRow.verdict, verdict),
                          (RecordRow.group_id, group_id), (RecordRow.task_id, task_id),
                          (RecordRow.task_hash, task_hash), (RecordRow.eval_id, eval_id),
                          (RecordRow.caller_key_id, caller_key_id)):
        if value is not None:
            where.append(column == value)
    if since is not None:
        where.append(RecordRow.created_at >= since)
    if until is not None:
        where.append(RecordRow.created_at < until)
    if flag is not None:
        where.append(store.has_flag(flag))
    return where


def _iso(moment: datetime) -> str:
    """As pydantic writes a datetime: ISO 8601, `Z` for UTC."""
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def export_line(r: Any) -> str:
    components = {name: {"value": float(c["value"]), "hard": bool(c["hard"])} for name, c in r.components.items()}
    out = {
        "id": r.id, "seq": r.seq, "created_at": _iso(r.created_at), "request_id": r.request_id,
        "caller_key_id": r.caller_key_id, "task_id": r.task_id, "task_hash": r.task_hash, "task": r.task_public,
        "verifier": r.verifier, "verifier_version": r.verifier_version, "response_hash": r.response_hash,
        "response": r.response, "components": components, "reward": float(r.reward), "verdict": r.verdict,
        "evidence": r.evidence, "feedback": r.feedback, "flags": r.flags or [], "flag_evidence": r.flag_evidence or {},
        "sandbox_backend": r.sandbox_backend, "usage": r.usage, "duration_ms": float(r.duration_ms),
        "group_id": r.group_id, "group_index": r.group_index, "tokens": r.tokens, "finish_reason": r.finish_reason,
        "masked": bool(r.masked), "eval_id": r.eval_id,
        "run": {"id": r.run_id, "step": r.run_step} if r.run_id is not None and r.run_step is not None else None,
    }
    return _dumps(out)


def _slow_line(r: Any) -> str:
    row = RecordRow(**{c.key: getattr(r, c.key) for c in _COLUMNS})
    return record_out(row).model_dump_json()


def export_lines(store: AuditStore, filters: dict[str, Any]) -> Iterator[str]:
    """Chunks of JSON Lines, in write order."""
    where = conditions(store, **filters)
    after: int | None = None
    while True:
        stmt = select(*_COLUMNS).where(*where)
        if after is not None:
            stmt = stmt.where(RecordRow.seq > after)
        with store.db() as s:
            rows = s.execute(stmt.order_by(RecordRow.seq).limit(PAGE)).all()
        if not rows:
            return
        chunk: list[str] = []
        for r in rows:
            try:
                finite = math.isfinite(r.reward) and math.isfinite(r.duration_ms)
                chunk.append(export_line(r) if finite else _slow_line(r))
            except (ValueError, TypeError, KeyError, AttributeError):  # a stored shape the fast path does not know
                chunk.append(_slow_line(r))
            if len(chunk) == LINES_PER_CHUNK:
                yield "\n".join(chunk) + "\n"
                chunk = []
        if chunk:
            yield "\n".join(chunk) + "\n"
        after = rows[-1].seq
