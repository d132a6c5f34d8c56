"""Streaming export of records as JSON Lines, at database speed (issue 27).

Each line is what `record_out(row).model_dump_json()` gives (the API's RecordOut, fields in
its order; the same JSON value, whitespace inside the stored JSON fields aside).

- Postgres: the database builds each line (`LINE_SQL`: string concatenation, `to_json` for
  the strings, the stored JSON columns as they are). EXPORT_SESSIONS sessions each stream an
  interleaved share of the rows (seq modulo EXPORT_SESSIONS) through a server-side cursor,
  STREAM_ROWS at a time; Python merges them back into write order and joins lines. Memory stays
  bounded by EXPORT_SESSIONS x BATCHES_AHEAD batches whatever the export's size.
- SQLite (and a row with a value the SQL does not vouch for: a non-finite number): lines built
  in Python from plain rows fetched a keyset page at a time (PAGE rows, by `seq`), or through
  the pydantic model.
"""

from __future__ import annotations

import heapq
import json
import math
import queue
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import literal_column, select

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


def _number(column: str) -> str:
    """A float8 as JSON the way Python writes a float (`1.0`, not `1`)."""
    return (f"CASE WHEN {column} = trunc({column}) AND abs({column}) < 1e15 "
            f"THEN trunc({column})::numeric::text || '.0' ELSE {column}::text END")


def _nullable(expression: str) -> str:
    return f"coalesce({expression}, 'null')"


def _json_or(column: str, empty: str) -> str:
    """A stored JSON column, `empty` for SQL NULL or JSON null (as `flags or []` does)."""
    return f"CASE WHEN {column} IS NULL OR {column}::text = 'null' THEN '{empty}' ELSE {column}::text END"


_R = "records"
_ISO = (f"to_char({_R}.created_at AT TIME ZONE 'UTC', "
        f"CASE WHEN mod(extract(microseconds FROM {_R}.created_at)::bigint, 1000000) = 0 "
        f"THEN 'YYYY-MM-DD\"T\"HH24:MI:SS' ELSE 'YYYY-MM-DD\"T\"HH24:MI:SS.US' END)")
_FIELDS = [
    ("id", f"to_json({_R}.id)::text"), ("seq", f"{_R}.seq::text"), ("created_at", f"'\"' || {_ISO} || 'Z\"'"),
    ("request_id", _nullable(f"to_json({_R}.request_id)::text")),
    ("caller_key_id", _nullable(f"to_json({_R}.caller_key_id)::text")),
    ("task_id", _nullable(f"to_json({_R}.task_id)::text")), ("task_hash", f"to_json({_R}.task_hash)::text"),
    ("task", _nullable(f"{_R}.task_public::text")), ("verifier", f"to_json({_R}.verifier)::text"),
    ("verifier_version", f"to_json({_R}.verifier_version)::text"),
    ("response_hash", f"to_json({_R}.response_hash)::text"), ("response", _nullable(f"to_json({_R}.response)::text")),
    ("components", f"{_R}.components::text"), ("reward", _number(f"{_R}.reward")),
    ("verdict", f"to_json({_R}.verdict)::text"), ("evidence", f"{_R}.evidence::text"),
    ("feedback", _nullable(f"{_R}.feedback::text")), ("flags", _json_or(f"{_R}.flags", "[]")),
    ("flag_evidence", _json_or(f"{_R}.flag_evidence", "{}")),
    ("sandbox_backend", f"to_json({_R}.sandbox_backend)::text"), ("usage", _nullable(f"{_R}.usage::text")),
    ("duration_ms", _number(f"{_R}.duration_ms")), ("group_id", _nullable(f"to_json({_R}.group_id)::text")),
    ("group_index", _nullable(f"{_R}.group_index::text")), ("tokens", _nullable(f"{_R}.tokens::text")),
    ("finish_reason", _nullable(f"to_json({_R}.finish_reason)::text")),
    ("masked", f"CASE WHEN {_R}.masked THEN 'true' ELSE 'false' END"),
    ("eval_id", _nullable(f"to_json({_R}.eval_id)::text")),
    ("run", f"CASE WHEN {_R}.run_id IS NOT NULL AND {_R}.run_step IS NOT NULL THEN '{{\"id\":' || "
            f"to_json({_R}.run_id)::text || ',\"step\":' || {_R}.run_step::text || '}}' ELSE 'null' END"),
]
# The whole line, or NULL where Python must write it (a non-finite float is not JSON).
LINE_SQL = (f"CASE WHEN {_R}.reward IN ('NaN', 'Infinity', '-Infinity') "
            f"OR {_R}.duration_ms IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE "
            + " || ".join(f"'{'{' if i == 0 else ','}\"{name}\":' || {sql}" for i, (name, sql) in enumerate(_FIELDS))
            + " || '}' END")
STREAM_ROWS = 2000
EXPORT_SESSIONS = 2
BATCHES_AHEAD = 2
_END = object()


def _line_stream(store: AuditStore, where: list[Any], part: int, out: queue.Queue, stop: threading.Event) -> None:
    """One database session builds the lines of the rows with seq % EXPORT_SESSIONS == part, in
    seq order, and hands them over a batch at a time; it waits while `out` is full (bounded
    memory) and gives up when the export stops (a client that hangs up)."""
    stmt = (select(RecordRow.seq, literal_column(LINE_SQL).label("line")).select_from(RecordRow.__table__)
            .where(*where, RecordRow.seq % EXPORT_SESSIONS == part).order_by(RecordRow.seq))
    try:
        with store.engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=STREAM_ROWS).execute(stmt)
            for rows in result.partitions():
                if not _hand_over(out, rows, stop):
                    return
        _hand_over(out, _END, stop)
    except Exception as exc:  # the reader re-raises it: the export fails loudly, never short
        _hand_over(out, exc, stop)


def _hand_over(out: queue.Queue, item: Any, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            out.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def _rows_from(out: queue.Queue) -> Iterator[Any]:
    while True:
        item = out.get()
        if item is _END:
            return
        if isinstance(item, Exception):
            raise item
        yield from item


def _lines_in_sql(store: AuditStore, where: list[Any]) -> Iterator[str]:
    # Building a line costs the database ~20-40 us a row, more than Python spends on it, so
    # EXPORT_SESSIONS sessions build interleaved shares (by seq) at once and the lines are
    # merged back into write order here; each session keeps at most BATCHES_AHEAD batches ready.
    stop = threading.Event()
    outs: list[queue.Queue] = [queue.Queue(maxsize=BATCHES_AHEAD) for _ in range(EXPORT_SESSIONS)]
    sessions = [threading.Thread(target=_line_stream, args=(store, where, part, out, stop), daemon=True,
                                 name=f"assay-export-{part}") for part, out in enumerate(outs)]
    for session in sessions:
        session.start()
    try:
        lines: list[str] = []
        for seq, line in heapq.merge(*(_rows_from(out) for out in outs)):
            lines.append(line if line is not None else _slow_line_of(store, seq))
            if len(lines) == STREAM_ROWS:
                yield "\n".join(lines) + "\n"
                lines = []
        if lines:
            yield "\n".join(lines) + "\n"
    finally:
        stop.set()
        for session in sessions:
            session.join()


def _slow_line_of(store: AuditStore, seq: int) -> str:
    with store.db() as s:
        return _slow_line(s.execute(select(*_COLUMNS).where(RecordRow.seq == seq)).one())


def export_lines(store: AuditStore, filters: dict[str, Any]) -> Iterator[str]:
    """Chunks of JSON Lines, in write order."""
    where = conditions(store, **filters)
    if store.engine.dialect.name == "postgresql":
        yield from _lines_in_sql(store, where)
        return
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
