"""The audit at ten million records, second part (issue 27): task statistics per hour.

- `rollup_task_hours` (service/audit_rollups.py): the per-task tallies of `rollup_tasks` per
  UTC hour, so that task statistics over a time window add up whole hours instead of
  aggregating the window's records. The insert trigger on records (Postgres: the statement
  trigger's function is replaced; SQLite: the row trigger) now keeps it too; the records
  already stored are added here, one day partition at a time on Postgres.
- Indexes (verifier, duration_ms, seq) and (verifier, reward, seq) on records: the viewer's
  latency and reward sorts within a verifier (latency and reward depend on the verifier, so a
  walk down the sort's own index skipped millions of other verifiers' rows).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service import audit_partitions, audit_rollups

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.create_table(
        "rollup_task_hours",
        sa.Column("hour", sa.BigInteger, primary_key=True),
        sa.Column("task_hash", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("verifier", sa.String(64), nullable=False),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("first_seq", "attempts", "judged")),
        sa.Column("correct_sum", sa.Float, nullable=False),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("tokens_n", "tokens_sum", "groups", "zv_groups")),
    )
    # The viewer's reward and latency sorts within a verifier (on Postgres built on every partition).
    op.create_index("ix_records_verifier_duration_seq", "records", ["verifier", "duration_ms", "seq"])
    op.create_index("ix_records_verifier_reward_seq", "records", ["verifier", "reward", "seq"])
    if dialect == "postgresql":
        schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
        for statement in audit_rollups.postgres_trigger_statements(schema, quarters=False, runs=False,
                                                                     split_groups=False):
            op.execute(statement)
        sources = audit_partitions.record_tables(bind)
        # A group's rows of one hour lie in one day's partition: a day at a time is exact.
        for source in sources:
            op.execute(audit_rollups.task_hours_statement("postgresql", f"(SELECT * FROM {source})"))
        op.execute("ANALYZE rollup_task_hours")
    elif dialect == "sqlite":
        op.execute(audit_rollups.task_hours_statement("sqlite", "(SELECT * FROM records)"))
        for statement in audit_rollups.sqlite_trigger_statements(quarters=False):
            op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("rollups are derived audit data: no downgrade")
