"""Group commit for audit records: one writer thread writes the records of every request in
flight in one transaction, and each request answers only once its own rows are durable.

Requests hand their rows (records, task blobs, the idempotent response) to `RecordWriter.submit`
and wait on the future it returns (`AuditStore.append` blocks on it; the engine awaits
`AuditStore.append_async`, which needs no thread of its own). The writer thread takes
everything queued, links the rows into a hash chain in queue order (service/audit_chain.py),
inserts them with SQLAlchemy Core (`executemany`, no ORM unit of work) and commits once
(SQLite `synchronous=FULL`, or a Postgres commit); only then does it resolve the futures. So
while one commit is on disk, the next requests queue up and share the next one: batching comes
from the load itself, with no timer and no added wait for a lone request.

A batch that fails (a request's `request_id` or idempotency key already taken, a chain index
another writer took, a value the database refuses) is rolled back and its requests are written
again one transaction each, as before group commit: each waiter then gets its own result, and
a failure belongs to the request that caused it. A database error is raised to its waiter as
`AuditWriteFailed` (a 503 for the caller: nothing was answered); an `IntegrityError` is raised
as itself, since the engine reads it as "a concurrent retry of the same request won".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from sqlalchemy import Connection, Engine, Table, insert
from sqlalchemy.exc import IntegrityError

from service import batch_rollups
from service.audit_chain import LINK_ATTEMPTS, ChainWriter, Lane
from service.errors import AuditWriteFailed
from service.tables import IdempotencyRow, RecordRow, TaskBlobRow, add_blobs

log = logging.getLogger(__name__)

# Rows taken into one transaction at most: bounds a commit's size (and a waiter's wait) under a flood.
MAX_BATCH_ROWS = 4096
# Task hashes remembered as stored (then forgotten all at once: a forgotten blob is inserted again, a no-op).
MAX_STORED_BLOBS = 65536
_STOP = object()


@dataclass
class _Pending:
    rows: list[RecordRow]
    blobs: list[TaskBlobRow]
    idempotency: IdempotencyRow | None
    done: Future[None] = field(default_factory=Future)


def _insert_objects(conn: Connection, table: Table, objects: list[Any]) -> None:
    """Insert ORM objects with Core `executemany`, in order, as the ORM's unit of work would: a
    column the object holds no value for is left out (its default, or SQL NULL, applies), and
    the autoincrement key is the database's. Consecutive objects that set the same columns go
    in one `executemany` (the engine's records all do)."""
    keys = [c.key for c in table.columns if not (c.primary_key and c.autoincrement is True)]
    statement = _INSERTS.get(table.name)
    if statement is None:
        statement = _INSERTS[table.name] = insert(table)
    for columns, run in groupby(({k: obj.__dict__[k] for k in keys if k in obj.__dict__} for obj in objects),
                                key=tuple):
        values = list(run)
        plain = _plain_insert(conn, table, columns) if conn.dialect.name == "sqlite" else None
        if plain is None:
            conn.execute(statement, values)
        else:
            sql, processors = plain
            conn.exec_driver_sql(sql, [tuple(v if p is None else p(v) for p, v in zip(processors, row.values(),
                                                                                    strict=True))
                                       for row in values])


def _plain_insert(conn: Connection, table: Table, columns: tuple[str, ...]) -> _Plain | None:
    """SQLite: the INSERT that Core compiles for these columns, and each column type's own bind
    processor (what Core applies to each value: JSON text, time text, booleans as 0/1), so that
    rows go to the driver's `executemany` as tuples, without Core's per-row parameter work
    (about a third of the writer's Python time a record; the stored bytes are the same,
    tests/test_writer_exact.py). None where Core would add values itself: a column with a
    Python-side default that the rows leave out (Core computes it per row)."""
    key = (table.name, columns)
    if key not in _PLAIN:
        if any(c.default is not None and c.key not in columns for c in table.columns
               if not (c.primary_key and c.autoincrement is True)):
            _PLAIN[key] = None
        else:
            compiled = insert(table).compile(dialect=conn.dialect, column_keys=list(columns))
            if compiled.positiontup != list(columns):  # not plain positional binds in column order
                _PLAIN[key] = None
            else:
                _PLAIN[key] = (str(compiled), tuple(table.c[c].type._cached_bind_processor(conn.dialect)
                                                    for c in columns))
    return _PLAIN[key]


_INSERTS: dict[str, Any] = {}
_Plain = tuple[str, tuple[Callable[[Any], Any] | None, ...]]
_PLAIN: dict[tuple[str, tuple[str, ...]], _Plain | None] = {}
_RECORDS: Table = RecordRow.__table__  # type: ignore[assignment]
_IDEMPOTENCY: Table = IdempotencyRow.__table__  # type: ignore[assignment]


def _insert(conn: Connection, items: list[_Pending], stored: set[str] | frozenset[str] = frozenset(),
            rollups: bool = False) -> int:
    """`stored`: task hashes whose blobs this writer has committed (blobs are never removed).
    `rollups`: this writer keeps the rollups (SQLite from revision 0017 on; before it and on
    Postgres a trigger does): the records join those the rollups lag by, or all are added here,
    in this transaction (service/batch_rollups.py). Returns how many records the rollups lag by."""
    add_blobs(conn, [b for item in items for b in item.blobs if b.task_hash not in stored])
    records = [row for item in items for row in item.rows]
    _insert_objects(conn, _RECORDS, records)
    lag = batch_rollups.defer_new_rows(conn, len(records)) if rollups else 0
    _insert_objects(conn, _IDEMPOTENCY, [item.idempotency for item in items if item.idempotency is not None])
    return lag


class RecordWriter:
    def __init__(self, engine: Engine, chains: ChainWriter, prepare: Callable[[_Pending], None] | None = None) -> None:
        """`prepare(pending)` runs on the writer thread before a request's rows are linked
        (the store fills in each record's task digest there)."""
        self.engine = engine
        self.chains = chains
        self.prepare = prepare
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        # Transactions committed and requests they carried (a request's rows count once they are durable).
        self.commits = 0
        self.requests_written = 0
        # Task hashes of blobs committed by this writer: a task's next requests skip its blob's insert.
        self._stored_blobs: set[str] = set()
        # The writer thread's own connection, kept between transactions (no pool checkout, reset
        # and checkin per commit); dropped after any failure and opened again for the next one.
        self._conn: Connection | None = None
        self._rollups = False  # this writer adds the rollups (read when the connection opens)
        self._lagging = False  # records committed by this writer may be missing from the rollups

    # ------------------------------------------------------------------ callers

    def submit(self, rows: list[RecordRow], blobs: list[TaskBlobRow],
               idempotency: IdempotencyRow | None = None) -> Future[None]:
        """Queue a request's rows; the future completes once they are committed (or fails with
        the reason they were not)."""
        pending = _Pending(rows, blobs, idempotency)
        with self._start_lock:  # never behind the stop mark: a submitted request is always written or failed
            if self._closed:
                raise AuditWriteFailed("the audit store is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="assay-record-writer", daemon=True)
                self._thread.start()
            self._queue.put(pending)
        return pending.done

    def append(self, rows: list[RecordRow], blobs: list[TaskBlobRow],
               idempotency: IdempotencyRow | None = None) -> None:
        self.submit(rows, blobs, idempotency).result()

    async def append_async(self, rows: list[RecordRow], blobs: list[TaskBlobRow],
                           idempotency: IdempotencyRow | None = None) -> None:
        """As `append`, awaited on the event loop. A cancelled caller does not withdraw its rows:
        once submitted they are written, as a request's rows always were."""
        await asyncio.shield(asyncio.wrap_future(self.submit(rows, blobs, idempotency)))

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        with self._start_lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()

    # ------------------------------------------------------------------ writer thread

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One transaction on the writer's connection (committed when the block ends)."""
        if self._conn is None:
            self._conn = self.engine.connect()
            with self._conn.begin():
                self._rollups = batch_rollups.kept_by_writer(self._conn)
        try:
            with self._conn.begin():
                yield self._conn
        except BaseException:
            self._drop_connection()
            raise

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            self._drop_connection()

    def catch_up_before_read(self, conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        """The store's SQLite engine's `before_cursor_execute`: before a statement that names a
        rollup table runs, add the records the rollups lag by, whichever writer left them
        (service/batch_rollups.py). Not on the writer's own thread, which keeps them itself."""
        if "rollup_" in statement and threading.current_thread() is not self._thread:
            batch_rollups.catch_up(conn.connection.dbapi_connection)  # type: ignore[arg-type]

    def _catch_up(self) -> None:
        """Add the records the rollups lag by, in a transaction of their own (the writer is idle)."""
        raw = self.engine.raw_connection()
        try:
            batch_rollups.catch_up_alone(raw.dbapi_connection)  # type: ignore[arg-type]
            self._lagging = False
        except Exception:  # noqa: BLE001 - tried again when next idle; every reader catches up first
            log.exception("the record writer could not add the lagging records to the rollups")
        finally:
            raw.close()

    def _serve(self) -> None:
        while True:
            if self._lagging:
                try:
                    first = self._queue.get(timeout=batch_rollups.CATCH_UP_IDLE_S)
                except queue.Empty:
                    self._catch_up()
                    continue
            else:
                first = self._queue.get()
            if first is _STOP:
                if self._lagging:
                    self._catch_up()
                return
            batch, size, stop = [first], len(first.rows), False
            while size < MAX_BATCH_ROWS:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                batch.append(more)
                size += len(more.rows)
            running = [p for p in batch if p.done.set_running_or_notify_cancel()]
            try:
                self._write(running)
            except Exception as exc:  # noqa: BLE001 - a bug here must not leave a request waiting forever
                log.exception("the record writer failed")
                for pending in running:
                    if not pending.done.done():
                        self._fail(pending, exc)
            if stop:
                if self._lagging:
                    self._catch_up()
                return

    def _write(self, batch: list[_Pending]) -> None:
        if self.prepare is not None:
            ready = []
            for pending in batch:
                try:
                    self.prepare(pending)
                except Exception as exc:  # noqa: BLE001 - that request's own failure
                    self._fail(pending, exc)
                else:
                    ready.append(pending)
            batch = ready
        if not batch:
            return
        with self.chains.lane("records") as lane:
            try:
                if not self._write_together(lane, batch):
                    self._write_one_by_one(lane, batch)
            finally:
                self.chains.sign_if_due(lane)

    def _write_together(self, lane: Lane, batch: list[_Pending]) -> bool:
        """The whole batch in one transaction. False (nothing written) when it failed."""
        rows = [row for pending in batch for row in pending.rows]
        try:
            if lane.index is None:
                lane.index, lane.prev = self.chains.read_head(lane)
            if rows:
                lane.link(rows)
            with self._transaction() as conn:
                lag = _insert(conn, batch, self._stored_blobs, self._rollups)
        except Exception as exc:  # noqa: BLE001 - retried one request at a time, where it is told apart
            if len(batch) == 1 and not isinstance(exc, IntegrityError):
                lane.index = None  # the database's head is what counts after a failure
                self._fail(batch[0], exc)
                return True
            log.info("a batch of %d requests failed together (%s); writing them one by one", len(batch),
                     type(exc).__name__)
            return False
        if rows:
            lane.advance(rows)
        self._committed(batch, lag)
        self.requests_written += len(batch)
        for pending in batch:
            pending.done.set_result(None)
        return True

    def _write_one_by_one(self, lane: Lane, batch: list[_Pending]) -> None:
        """One transaction per request, as without group commit: a chain index another writer
        took is linked again after its rows; any other failure is that request's own."""
        for pending in batch:
            try:
                self._write_alone(lane, pending)
            except Exception as exc:  # noqa: BLE001 - handed to the request's waiter
                lane.index = None
                self._fail(pending, exc)
            else:
                pending.done.set_result(None)

    def _write_alone(self, lane: Lane, pending: _Pending) -> None:
        for attempt in range(LINK_ATTEMPTS):
            if lane.index is None:
                lane.index, lane.prev = self.chains.read_head(lane)
            if pending.rows:
                lane.link(pending.rows)
            try:
                with self._transaction() as conn:
                    lag = _insert(conn, [pending], self._stored_blobs, self._rollups)
            except IntegrityError:
                head = self.chains.read_head(lane)
                if head == (lane.index, lane.prev) or attempt + 1 == LINK_ATTEMPTS:
                    raise  # not the chain: the request's own conflict (request_id, idempotency key)
                lane.index, lane.prev = head  # another writer on this chain id: link after its rows
                continue
            if pending.rows:
                lane.advance(pending.rows)
            self._committed([pending], lag)
            self.requests_written += 1
            return

    def _committed(self, batch: list[_Pending], lag: int) -> None:
        self.commits += 1
        self._lagging = lag > 0
        if len(self._stored_blobs) >= MAX_STORED_BLOBS:
            self._stored_blobs.clear()
        self._stored_blobs.update(b.task_hash for pending in batch for b in pending.blobs)

    @staticmethod
    def _fail(pending: _Pending, exc: Exception) -> None:
        if isinstance(exc, IntegrityError | AuditWriteFailed):
            pending.done.set_exception(exc)
            return
        log.error("could not write %d audit records: %s", len(pending.rows), exc, exc_info=exc)
        failed = AuditWriteFailed("the audit records could not be written; the request was not answered")
        failed.__cause__ = exc
        pending.done.set_exception(failed)
