"""The SQLite rollups, added once per committed batch by the record writer (revision 0017).

Until revision 0017 four per-row AFTER INSERT triggers on `records` kept the rollup tables
(service/audit_rollups.py) on SQLite: the four rollup statements ran once for every record,
about half of the record writer's CPU (`bench/audit_write_cost.py --no-rollups`). Revision
0017 drops those triggers; the record writer now runs the same statements once per
transaction, over the rows that transaction inserted, as the Postgres statement trigger does
over its transition table. They run inside the writer's transaction, after its inserts and
before its commit: records and their rollups commit together or not at all (a kill -9 cannot
leave a committed record without its rollups; tests/test_rollups_exact.py).

The new rows are the transaction's last `n` rows by `seq`: `seq` is the table's rowid and the
transaction holds SQLite's write lock from its first insert, so no other writer's rows can lie
between them. A store whose SQLite triggers are still there (one behind revision 0017) keeps
its triggers and is never added to twice (`kept_by_writer`).
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import Connection

from service.audit_rollups import SQLITE_TRIGGERS, rollup_statements

# The rows this transaction inserted (`:after`: the largest seq before them).
NEW_ROWS = "(SELECT * FROM records WHERE seq > :after)"


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


def add_new_rows(conn: Connection, inserted: int) -> None:
    """Add the `inserted` records this transaction just wrote to the rollups (in its transaction)."""
    if inserted:
        top = conn.exec_driver_sql("SELECT max(seq) FROM records").scalar_one()
        for statement in _statements():
            conn.exec_driver_sql(statement, {"after": top - inserted})
