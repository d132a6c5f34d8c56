"""Postgres: `records` partitioned by day of `created_at` (revision 0012).

One partition per UTC day, `records_pYYYYMMDD`, plus `records_default`, which takes any row
no day partition covers (so a write never fails for want of a partition; it stays empty
while day partitions are made ahead). Day partitions are made by the schema owner, never by
the service's role: by the migration (the days that hold rows, and DAYS_AHEAD days ahead),
and by `assay audit partitions` / `assay audit archive` (run one of them daily or at least
monthly from cron). Archiving removes whole day partitions (service/audit_archive.py).

A partitioned table's unique index must contain the partition key, so the records' unique
keys (id, caller + request id, submission + index, chain + index) live in `record_keys`,
filled by the insert trigger (service/audit_rollups.py); on `records` the same-named
indexes are plain ones, which is the only difference `schema_differences` tolerates
between the models and a Postgres database.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

DAYS_AHEAD = 14
DEFAULT_PARTITION = "records_default"
# Unique on the models, plain indexes on partitioned Postgres records (record_keys is unique).
UNIQUE_ON_RECORD_KEYS = frozenset({"uq_records_chain", "uq_records_submission_index", "uq_records_caller_request",
                                   "records_id_key"})
# Expression indexes the models cannot declare (Alembic does not compare them).
EXPRESSION_INDEXES = frozenset({"ix_records_flags_gin"})


def partition_name(day: date) -> str:
    return f"records_p{day:%Y%m%d}"


def day_of(name: str) -> date | None:
    if not name.startswith("records_p") or len(name) != len("records_p20260101"):
        return None
    try:
        return datetime.strptime(name.removeprefix("records_p"), "%Y%m%d").date()
    except ValueError:
        return None


def day_bounds(day: date) -> tuple[datetime, datetime]:
    lo = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return lo, lo + timedelta(days=1)


def is_partitioned(conn: sa.Connection) -> bool:
    if conn.dialect.name != "postgresql":
        return False
    return bool(conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
        "WHERE c.relname = 'records' AND c.relnamespace = current_schema()::regnamespace)")).scalar())


def is_partitioned_store(store: Any) -> bool:
    """`is_partitioned` of an AuditStore's database, asked once per store."""
    known = getattr(store, "_records_partitioned", None)
    if known is None:
        with store.engine.connect() as conn:
            known = is_partitioned(conn)
        store._records_partitioned = known
    return known


def day_partitions(conn: sa.Connection) -> list[tuple[date, str]]:
    """The day partitions attached to records, oldest first."""
    names = conn.execute(sa.text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'records'::regclass")).scalars()
    found = [(day_of(n), n) for n in names]
    return sorted((d, n) for d, n in found if d is not None)


def record_tables(conn: sa.Connection) -> list[str]:
    """The tables that hold records, for a back-fill one table at a time: each day partition
    (oldest first) and the default partition on partitioned Postgres, else `records`."""
    if not is_partitioned(conn):
        return ["records"]
    return [*(name for _, name in day_partitions(conn)), DEFAULT_PARTITION]


def create_partitions(conn: sa.Connection, days: Iterable[date]) -> list[str]:
    """Create the missing day partitions; a day whose rows already sit in the default
    partition is left there (reported by `assay audit partitions`). Returns the names made."""
    made = []
    existing = {n for _, n in day_partitions(conn)}
    for day in sorted(set(days)):
        name = partition_name(day)
        if name in existing:
            continue
        lo, hi = day_bounds(day)
        savepoint = conn.begin_nested()
        try:
            conn.exec_driver_sql(f"CREATE TABLE {name} PARTITION OF records "
                                 f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')")
        except DBAPIError:
            savepoint.rollback()
            continue
        savepoint.commit()
        made.append(name)
    return made


def ensure_ahead(conn: sa.Connection, days_ahead: int = DAYS_AHEAD, today: date | None = None) -> list[str]:
    today = today or datetime.now(UTC).date()
    return create_partitions(conn, (today + timedelta(days=i) for i in range(-1, days_ahead + 1)))


def default_rows(conn: sa.Connection) -> int:
    return int(conn.execute(sa.text(f"SELECT count(*) FROM {DEFAULT_PARTITION}")).scalar() or 0)


def schema_differences(conn: sa.Connection, metadata: sa.MetaData) -> list[Any]:
    """Alembic's differences between the models and the database, less the unique indexes that a
    partitioned Postgres `records` keeps in `record_keys` instead."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def include(obj: Any, name: str | None, kind: str, reflected: bool, other: Any) -> bool:
        table = name if kind == "table" else getattr(getattr(obj, "table", None), "name", None)
        return not (table == DEFAULT_PARTITION or (table is not None and day_of(table) is not None))

    context = MigrationContext.configure(conn, opts={"include_object": include})
    found = compare_metadata(context, metadata)
    if not is_partitioned(conn):
        return found

    def tolerated(diff: Any) -> bool:
        items = diff if isinstance(diff, list) else [diff]
        for item in items:
            obj = item[1] if isinstance(item, tuple) and len(item) > 1 else None
            name = getattr(obj, "name", None)
            table = getattr(getattr(obj, "table", None), "name", None)
            columns = [c.name for c in getattr(obj, "columns", [])]
            if name is None and columns == ["id"]:  # the model's unnamed unique id
                name = "records_id_key"
            if table != "records" or name not in UNIQUE_ON_RECORD_KEYS | EXPRESSION_INDEXES:
                return False
        return True

    return [d for d in found if not tolerated(d)]


DERIVED_TABLES = frozenset({"rollup_hours", "rollup_tasks", "rollup_task_hours", "rollup_quarters", "rollup_run_steps",
                            "record_keys", "run_step_figures", "rollup_split_groups",
                            "run_held_out_figures", "bootstrap_intervals", "labelled_records"})


def is_derived(table: str) -> bool:
    """Tables whose rows are derived from records (rollups, keys) or hold records' rows
    again (Postgres partitions, which the parent `records` lists)."""
    return table in DERIVED_TABLES or table == DEFAULT_PARTITION or day_of(table) is not None


def is_partition(table: str) -> bool:
    """A partition of records: the service's role gets nothing on it (it reads and writes through `records`)."""
    return table == DEFAULT_PARTITION or day_of(table) is not None
