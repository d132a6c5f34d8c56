"""Streaming export of records as JSON Lines, at database speed (issue 27).

Each line is what `record_out(row).model_dump_json()` gives (the API's RecordOut, fields in
its order; the same JSON value, whitespace inside the stored JSON fields aside).

- Postgres: the database builds each line (`LINE_SQL`: string concatenation, `to_json` for
  the strings, the stored JSON columns as they are, `null` for a non-finite float as pydantic
  writes it) and joins a chunk's lines into one text. SESSIONS sessions build chunks of
  disjoint seq ranges at once, each reading only its ranges' rows; a chunk's span adapts to
  how dense the matching rows are (about CHUNK_ROWS lines, never more). Chunks go out in seq
  order; memory stays bounded by CHUNKS_AHEAD chunks whatever the export's size. Each chunk is
  its own statement (read committed): a record committed during the export, below the highest
  seq at its start, is in it if its range is read after the commit.
- SQLite: lines built in Python from plain rows fetched a keyset page at a time (PAGE rows, by
  `seq`), or through the pydantic model for a value the fast path does not know.
"""

from __future__ import annotations

import json
import math
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, literal, literal_column, select

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
    """A float8 as JSON the way pydantic writes a float: `1.0` (not `1`), `-0.0`, `1e-05`,
    `1e+20`, `null` if not finite. PostgreSQL writes the shortest exact digits as Python does,
    in plain digits below 1e15, so a whole number there only lacks the `.0` (a numeric cast
    made the number half a line's cost)."""
    return (f"CASE WHEN abs({column}) >= 1e15 THEN CASE WHEN {column} IN ('NaN', 'Infinity', '-Infinity') "
            f"THEN 'null' ELSE {column}::text END "
            f"WHEN {column} = trunc({column}) THEN {column}::text || '.0' ELSE {column}::text END")


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
# The whole line (a non-finite float is written `null`, as pydantic writes it). One concat()
# copies each piece once; a chain of || copies the growing line at each step (a third slower).
LINE_SQL = ("concat(" + ", ".join(f"'{'{' if i == 0 else ','}\"{name}\":', {sql}"
                                  for i, (name, sql) in enumerate(_FIELDS)) + ", '}')")
CHUNK_ROWS = 2000
FIRST_SPAN = 4096
SESSIONS = 2
CHUNKS_AHEAD = 3
_STOP = object()


def _chunk_sql(where: list[Any]) -> Any:
    """One chunk: the lines of the matching rows with lo <= seq < hi (at most :rows of them),
    joined by the database into one text, with how many there are and the last seq."""
    lines = (select(RecordRow.seq, literal_column(LINE_SQL).label("line")).select_from(RecordRow.__table__)
             .where(*where, RecordRow.seq >= bindparam("lo"), RecordRow.seq < bindparam("hi"))
             .order_by(RecordRow.seq).limit(bindparam("rows")).subquery("chunk"))
    # The lines are joined in the order the subquery hands them over (ORDER BY seq LIMIT: a
    # single ordered stream into a plain aggregate, never parallel under the LIMIT). An ORDER BY
    # inside string_agg would sort the chunk again (PostgreSQL 15 has no presorted aggregates):
    # a copy of every line, spilled to disk past work_mem; it cost a sixth of a chunk's time.
    return select(func.count().label("n"), func.max(lines.c.seq).label("last"),
                  func.string_agg(lines.c.line, literal("\n")).label("text"))


def _session(store: AuditStore, statement: Any, tasks: queue.Queue, stop: threading.Event) -> None:
    """One database session: takes (lo, hi, rows, future) chunks off `tasks` until told to stop.
    It keeps its connection for the whole export, so the chunk statement is prepared once and
    its generic plan reused (planning over every day's partition costs more than a chunk)."""
    try:
        with store.engine.connect() as conn:
            # SET LOCAL: gone when the transaction ends, so the pooled connection goes back as it came.
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            while not stop.is_set():
                task = tasks.get()
                if task is _STOP:
                    return
                lo, hi, rows, future = task
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(conn.execute(statement, {"lo": lo, "hi": hi, "rows": rows}).one())
                except Exception as exc:  # the reader re-raises it: the export fails loudly, never short
                    future.set_exception(exc)
            conn.rollback()
    except Exception as exc:  # no connection: every chunk still waiting fails with it
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                return
            if task is not _STOP and task[3].set_running_or_notify_cancel():
                task[3].set_exception(exc)


def _lines_in_sql(store: AuditStore, where: list[Any]) -> Iterator[str]:
    # Building a line costs the database ~20-40 us a row, more than Python spends on it, so
    # SESSIONS sessions build chunks of disjoint seq ranges at once (each reads only the rows
    # of its ranges), the database joins each chunk's lines into one text, and chunks are
    # handed back in seq order. A chunk's span adapts to how dense the matching rows are, so a
    # chunk holds about CHUNK_ROWS lines; memory stays bounded by CHUNKS_AHEAD chunks.
    with store.db() as s:
        first, last = s.execute(select(func.min(RecordRow.seq), func.max(RecordRow.seq))).one()
    if first is None:
        return
    statement = _chunk_sql(where)
    tasks: queue.Queue = queue.Queue()
    stop = threading.Event()
    sessions = [threading.Thread(target=_session, args=(store, statement, tasks, stop), daemon=True,
                                 name=f"assay-export-{n}") for n in range(SESSIONS)]
    for session in sessions:
        session.start()
    pending: deque[tuple[int, int, Future]] = deque()  # asked, contiguous, in seq order, up to next_lo
    next_lo, span = first, FIRST_SPAN
    try:
        while pending or next_lo <= last:
            while next_lo <= last and len(pending) < CHUNKS_AHEAD:
                future: Future = Future()
                pending.append((next_lo, next_lo + span, future))
                tasks.put((next_lo, next_lo + span, CHUNK_ROWS, future))
                next_lo += span
            lo, hi, future = pending.popleft()
            n, last_seq, text = future.result()
            full = n == CHUNK_ROWS and last_seq + 1 < hi
            covered = (last_seq + 1 if full else hi) - lo
            span = max(1, min(int(covered * CHUNK_ROWS * 0.8 / n) if n else span * 2, 1 << 40))
            if full:
                # The rows are denser than the span was sized for: the rest of this range and the
                # ranges already asked after it are asked again at the new span (at most
                # CHUNKS_AHEAD - 1 chunks read for nothing), so both sessions keep working.
                for _, _, later in pending:
                    later.cancel()
                pending.clear()
                next_lo = last_seq + 1
            if text:
                yield text + "\n"
    finally:
        stop.set()
        for _ in sessions:
            tasks.put(_STOP)
        for session in sessions:
            session.join()


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
