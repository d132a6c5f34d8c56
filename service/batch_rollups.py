"""The SQLite rollups, kept by the record writer (revisions 0017 on), lagging the records by at
most a few hundred rows and caught up before any read.

Until revision 0017 four per-row AFTER INSERT triggers on `records` kept the rollup tables
(service/audit_rollups.py) on SQLite: the four rollup statements ran once for every record,
about half of the record writer's CPU (`bench/audit_write_cost.py --no-rollups`). Revision
0017 dropped those triggers and the record writer ran the same statements once per
transaction, over the rows that transaction inserted. A lone request still paid them whole
(about a third of the writer's CPU for one record, and the rollup tables' pages in its
commit), so the writer now lets them lag: a transaction that inserts records only marks
where the records not yet in the rollups begin, and the statements run over every such row
at once, when CATCH_UP_ROWS rows lag, when the writer has had nothing to write for
CATCH_UP_IDLE_S, when it stops, and before any statement that names a rollup table runs on one
of the store's connections (`RecordWriter.catch_up_before_read`; docs/benchmarks.md, "Seventh
pass (perf7 ...)"). A request's own reads (its request id, idempotency key, registered task)
name no rollup table and pay nothing.

The mark is SQLite's `user_version` (a 32-bit integer in the database header, written in the
same transaction as the rows): 0 when the rollups hold every record, else the seq of the first
record they do not hold. It is set in the transaction that inserts the first such record and
cleared in the transaction that adds them, so a crash (kill -9) between commits never loses
nor double counts a row: the next writer or reader finds the mark and catches up. Reading the
mark and adding the rows happen while holding SQLite's write lock, so two processes catching
up at once add the rows once. The rows from the mark on are exactly the ones not yet added:
`seq` is the table's rowid, records are never deleted on SQLite, and each transaction holds the
write lock from its first insert, so rows commit in seq order. The statements over many
committed requests give what they give over one batch (the earlier rows of a group are looked
up by seq before the first new row); tests/test_rollups_deferred.py and
tests/test_rollups_exact.py compare the tables with the records' recomputation.

A store whose SQLite triggers are still there (one behind revision 0017) keeps its triggers
and is never added to twice (`kept_by_writer`); it never sets the mark.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import cache
from typing import Any

from sqlalchemy import Connection

from service.audit_rollups import SQLITE_TRIGGERS, rollup_statements

# The rows not yet in the rollups (`:after`: the largest seq already in them).
NEW_ROWS = "(SELECT * FROM records WHERE seq > :after)"
# Records the rollups may lag by before the writer adds them inside the transaction at hand.
CATCH_UP_ROWS = 256
# Seconds without anything to write after which the writer adds the lagging records on its own.
CATCH_UP_IDLE_S = 0.05
# `user_version` is a signed 32-bit integer: a store past this seq adds its rollups at once.
_MARK_LIMIT = 2**31 - 1


@cache
def _statements() -> tuple[str, ...]:
    return tuple(rollup_statements("sqlite", NEW_ROWS))


def kept_by_writer(conn: Connection) -> bool:
    """True on a SQLite store whose rollups no trigger keeps (revision 0017 and later)."""
    if conn.dialect.name != "sqlite":
        return False
    names = ", ".join(f"'{name}'" for name in SQLITE_TRIGGERS)
    return conn.exec_driver_sql(
        f"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ({names})").scalar_one() == 0


def _add_from_mark(execute: Callable[..., Any], mark: int) -> None:
    """Add the records from seq `mark` on to the rollups and clear the mark (write lock held)."""
    for statement in _statements():
        execute(statement, {"after": mark - 1})
    execute("PRAGMA user_version = 0")


def defer_new_rows(conn: Connection, inserted: int) -> int:
    """In the writer's transaction, after it inserted `inserted` records: leave them out of the
    rollups for now, unless CATCH_UP_ROWS records would then lag (all are added here, in this
    transaction). Returns how many records the rollups lag by when this transaction commits."""
    if not inserted:
        return 0
    # On the DBAPI connection, in the same transaction: three statements a commit through
    # SQLAlchemy's execution context were ~45% of the writer's insert (perf10).
    execute = conn.connection.dbapi_connection.execute  # type: ignore[union-attr]
    top = execute("SELECT max(seq) FROM records").fetchone()[0]
    marked = execute("PRAGMA user_version").fetchone()[0]
    mark = marked or top - inserted + 1
    if top - mark + 1 >= CATCH_UP_ROWS or top >= _MARK_LIMIT:
        _add_from_mark(execute, mark)
        return 0
    if not marked:  # written only when it changes: each write puts the header page in the commit
        execute(f"PRAGMA user_version = {int(mark)}")
    return top - mark + 1


def catch_up(dbapi_connection: sqlite3.Connection) -> None:
    """Add every lagging record to the rollups on this SQLite connection: inside its transaction
    if it is in one (pysqlite opens one at a connection's first write, so it holds the write
    lock, and the rows commit or roll back with it), else in a transaction of its own."""
    if dbapi_connection.in_transaction:
        mark = dbapi_connection.execute("PRAGMA user_version").fetchone()[0]
        if mark:
            _add_from_mark(dbapi_connection.execute, mark)
        return
    catch_up_alone(dbapi_connection)


def catch_up_alone(dbapi_connection: sqlite3.Connection) -> None:
    """Add every lagging record to the rollups in a transaction of its own on this SQLite
    connection (not in a transaction): the mark is read again under the write lock."""
    if dbapi_connection.execute("PRAGMA user_version").fetchone()[0] == 0:
        return  # every record committed before this read is in the rollups
    dbapi_connection.execute("BEGIN IMMEDIATE")
    try:
        mark = dbapi_connection.execute("PRAGMA user_version").fetchone()[0]
        if mark:
            _add_from_mark(dbapi_connection.execute, mark)
        dbapi_connection.commit()
    except BaseException:
        dbapi_connection.rollback()
        raise
