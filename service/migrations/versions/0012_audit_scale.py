"""The audit at ten million records (issue 27): rollups kept by triggers, records partitioned
by day on Postgres, unique keys in `record_keys`, and the archive log.

- `rollup_hours`, `rollup_tasks` (service/audit_rollups.py): aggregates the overview, the
  review queue and the task statistics read; an insert trigger on records keeps them (a
  statement trigger over the transition table on Postgres, a row trigger on SQLite); the
  records already stored are added here.
- Postgres: `records` becomes a table partitioned by range of `created_at`, one partition a
  day (service/audit_partitions.py). Its rows are copied over in `seq` order, keeping every
  column, the sequence and the hash chains as they are. The unique indexes become plain ones;
  uniqueness moves to `record_keys` (filled by the trigger), and a GIN index on the flags
  serves flag filters. SQLite keeps its plain table with its unique indexes.
- `audit_archives`: one append-only row per `assay audit archive` (where the archive is,
  its digest and each chain's last archived row).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from service import audit_partitions, audit_rollups
from service.migrations import append_only_statements

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.create_table(
        "rollup_hours",
        sa.Column("hour", sa.BigInteger, primary_key=True),
        sa.Column("verifier", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "rollup_tasks",
        sa.Column("task_hash", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("verifier", sa.String(64), nullable=False),
        sa.Column("first_seq", sa.BigInteger, nullable=False),
        sa.Column("first_at", _TZ, nullable=False),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("attempts", "judged")),
        sa.Column("correct_sum", sa.Float, nullable=False),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("tokens_n", "tokens_sum", "groups", "zv_groups")),
    )
    op.create_index("ix_rollup_tasks_first_seq", "rollup_tasks", ["first_seq"])
    op.create_index("ix_rollup_tasks_verifier_first_seq", "rollup_tasks", ["verifier", "first_seq"])
    op.create_table(
        "record_keys",
        sa.Column("record_id", sa.String(32), primary_key=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("caller_key_id", sa.String(64)),
        sa.Column("request_id", sa.String(200)),
        sa.Column("submission_id", sa.String(32)),
        sa.Column("submission_index", sa.Integer),
        sa.Column("chain_id", sa.String(64)),
        sa.Column("chain_index", sa.Integer),
        sa.UniqueConstraint("caller_key_id", "request_id", name="uq_record_keys_request"),
    )
    op.create_index("uq_record_keys_submission", "record_keys", ["submission_id", "submission_index"], unique=True)
    op.create_index("uq_record_keys_chain", "record_keys", ["chain_id", "chain_index"], unique=True)
    op.create_table(
        "audit_archives",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("before", _TZ, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("manifest", sa.JSON, nullable=False),
    )
    for statement in append_only_statements(dialect, "audit_archives"):
        op.execute(statement)
    if dialect == "postgresql":
        _partition_records(bind)
    op.create_index("ix_records_task_hash_seq", "records", ["task_hash", "seq"])
    if dialect == "postgresql":
        op.execute("ANALYZE records")
    elif dialect == "sqlite":
        for statement in audit_rollups.backfill_statements("sqlite", task_hours=False, quarters=False,
                                                          split_groups=False):
            op.execute(statement)
        for statement in audit_rollups.sqlite_trigger_statements(task_hours=False, quarters=False):
            op.execute(statement)


def _partition_records(bind: sa.Connection) -> None:
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
    sequence = bind.execute(sa.text("SELECT pg_get_serial_sequence('records', 'seq')")).scalar_one()
    indexes = bind.execute(sa.text(
        "SELECT i.relname, pg_get_indexdef(i.oid), x.indisprimary FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'records'::regclass ORDER BY i.relname")).all()
    days = bind.execute(sa.text("SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM records")).scalars().all()
    op.execute("DROP STATISTICS IF EXISTS records_filter_stats")
    op.execute("ALTER TABLE records RENAME TO records_unpartitioned")
    for number, (name, _, _) in enumerate(indexes):
        op.execute(f'ALTER INDEX "{name}" RENAME TO "records_unpartitioned_{number}"')
    op.execute("CREATE TABLE records (LIKE records_unpartitioned INCLUDING DEFAULTS) PARTITION BY RANGE (created_at)")
    op.execute("ALTER TABLE records ADD CONSTRAINT records_pkey PRIMARY KEY (seq, created_at)")
    op.execute(f"CREATE TABLE {audit_partitions.DEFAULT_PARTITION} PARTITION OF records DEFAULT")
    audit_partitions.create_partitions(bind, days)
    audit_partitions.ensure_ahead(bind, today=datetime.now(UTC).date())
    for _name, definition, primary in indexes:
        if primary:
            continue
        definition = definition.replace("CREATE UNIQUE INDEX", "CREATE INDEX", 1)
        definition = definition.replace(" ON ONLY ", " ON ", 1)
        op.execute(definition)
    op.execute("CREATE INDEX ix_records_flags_gin ON records USING gin ((flags::jsonb) jsonb_path_ops)")
    for statement in append_only_statements("postgresql", "records"):
        op.execute(statement)
    for statement in audit_rollups.postgres_trigger_statements(schema, task_hours=False, quarters=False, runs=False,
                                                                 split_groups=False):
        op.execute(statement)
    # Through the parent: each row lands in its day's partition, and the trigger fills
    # record_keys (checking uniqueness as before) and the rollups.
    op.execute("INSERT INTO records SELECT * FROM records_unpartitioned ORDER BY seq")
    op.execute(f"ALTER SEQUENCE {sequence} OWNED BY records.seq")
    op.execute("DROP TABLE records_unpartitioned")
    op.execute("CREATE STATISTICS IF NOT EXISTS records_filter_stats (mcv, dependencies) "
               "ON verifier, verdict, caller_key_id FROM records")
    op.execute("ANALYZE records")


def downgrade() -> None:
    raise NotImplementedError("records and their rollups are audit data: no downgrade")
