"""Streaming export of records as JSON Lines, at database speed (issue 27).

Each line is what `record_out(row).model_dump_json()` gives (the API's RecordOut, fields in
its order; the same JSON value, whitespace inside the stored JSON fields aside). The fields
and how each is written come from one place, service/record_line.py.

An export holds the records as of its start, whatever is committed while it runs.

- Postgres: the database builds each line (`LINE_SQL`) and joins a chunk's lines into one
  text. SESSIONS sessions build chunks of disjoint seq ranges at once, each reading only its
  ranges' rows, all in one snapshot (the first session's REPEATABLE READ transaction exports
  it, the others import it). A chunk's span adapts to how dense the matching rows are (about
  CHUNK_ROWS lines, never more). Chunks go out in seq order; memory stays bounded by
  CHUNKS_AHEAD chunks whatever the export's size.
- SQLite: lines built in Python from plain rows fetched a keyset page at a time (PAGE rows, by
  `seq`, up to the highest seq at the start), or through the pydantic model for a value the
  fast path does not know.
"""

from __future__ import annotations

import math
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal, literal_column, select

from service.pipeline.results import record_out
from service.record_line import COLUMNS, LINE_SQL, export_line
from service.store import AuditStore
from service.tables import RecordRow

PAGE = 2000
LINES_PER_CHUNK = 200
_COLUMNS = [RecordRow.__table__.c[name] for name in COLUMNS]


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


def _slow_line(r: Any) -> str:
    row = RecordRow(**{c.key: getattr(r, c.key) for c in _COLUMNS})
    return record_out(row).model_dump_json()


CHUNK_ROWS = 2000
FIRST_SPAN = 4096
# Three sessions on two cores: with two, each session waited on more than its CPU (the chunk's
# transfer, page reads) and PostgreSQL used ~1.2-1.3 cores; a third fills those gaps
# (docs/benchmarks.md, export10). One more chunk ahead keeps all three busy.
SESSIONS = 3
CHUNKS_AHEAD = 4
LOCK_TIMEOUT_MS = 10_000
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


def _session(conn: Connection, statement: Any, tasks: queue.Queue, stop: threading.Event) -> None:
    """One database session: takes (lo, hi, rows, future) chunks off `tasks` until told to stop.
    Its connection is held for the whole export, so the chunk statement is prepared once and
    its generic plan reused (planning over every day's partition costs more than a chunk)."""
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


def _hold_records(conn: Connection) -> None:
    """Set up an export session: a generic plan, and every lock it needs taken now (LOCK TABLE
    takes every partition). A session that first asked for a lock mid-export would queue behind
    a DDL (an index build, an archive dropping a day) waiting on the other sessions' locks, which
    wait on this export: a hang no deadlock check sees, with every read and write of records
    queued behind that DDL. A lock wait here fails the export after LOCK_TIMEOUT_MS instead.
    SET LOCAL: gone with the transaction, so the pooled connection goes back as it came."""
    conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
    conn.exec_driver_sql(f"LOCK TABLE {RecordRow.__tablename__} IN ACCESS SHARE MODE")


@contextmanager
def _snapshot_sessions(store: AuditStore) -> Iterator[tuple[list[Connection], int | None, int | None]]:
    """SESSIONS connections that all read one snapshot, taken now: the first opens a REPEATABLE
    READ transaction and exports its snapshot (pg_export_snapshot), the others import it (SET
    TRANSACTION SNAPSHOT, their first statement) while the first's transaction is open, which it
    stays until the export ends. Also the lowest and highest seq in that snapshot."""
    with ExitStack() as opened:
        conns = [opened.enter_context(store.engine.connect().execution_options(isolation_level="REPEATABLE READ"))
                 for _ in range(SESSIONS)]
        _hold_records(conns[0])
        first, last = conns[0].execute(select(func.min(RecordRow.seq), func.max(RecordRow.seq))).one()
        snapshot = conns[0].exec_driver_sql("SELECT pg_export_snapshot()").scalar_one()
        for conn in conns[1:]:
            conn.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")  # an id PostgreSQL made: no quotes in it
            _hold_records(conn)
        try:
            yield conns, first, last
        finally:
            for conn in conns:
                conn.rollback()


def _lines_in_sql(store: AuditStore, where: list[Any]) -> Iterator[str]:
    # Building a line costs the database ~20-40 us a row, more than Python spends on it, so
    # SESSIONS sessions build chunks of disjoint seq ranges at once (each reads only the rows
    # of its ranges), the database joins each chunk's lines into one text, and chunks are
    # handed back in seq order. A chunk's span adapts to how dense the matching rows are, so a
    # chunk holds about CHUNK_ROWS lines; memory stays bounded by CHUNKS_AHEAD chunks. All the
    # sessions read one snapshot, taken when the export starts.
    with _snapshot_sessions(store) as (conns, first, last):
        if first is None:
            return
        yield from _chunks_in_order(conns, _chunk_sql(where), first, last)


def _chunks_in_order(conns: list[Connection], statement: Any, first: int, last: int) -> Iterator[str]:
    tasks: queue.Queue = queue.Queue()
    stop = threading.Event()
    sessions = [threading.Thread(target=_session, args=(conn, statement, tasks, stop), daemon=True,
                                 name=f"assay-export-{n}") for n, conn in enumerate(conns)]
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
                # CHUNKS_AHEAD - 1 chunks read for nothing), so every session keeps working.
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
    flag = filters.get("flag")
    if flag is not None and store.flag_absent(flag, verifier=filters.get("verifier"), since=filters.get("since"),
                                              until=filters.get("until")):
        return
    where = conditions(store, **filters)
    if store.engine.dialect.name == "postgresql":
        yield from _lines_in_sql(store, where)
        return
    # The records as of now: SQLite has one writer at a time and records are never deleted
    # there, so a record committed from now on has a seq above the highest one now.
    with store.db() as s:
        last = s.execute(select(func.max(RecordRow.seq))).scalar()
    if last is None:
        return
    where.append(RecordRow.seq <= last)
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
