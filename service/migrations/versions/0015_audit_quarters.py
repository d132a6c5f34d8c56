"""The audit at ten million records, fourth part (issue 27): counts per quarter hour.

- `rollup_quarters` (service/audit_rollups.py): the counts of `rollup_hours` per quarter hour
  (epoch seconds // 900), so that the overview of a window of up to 12 hours (15-minute
  buckets) adds up whole quarter hours instead of reading every record of the window. The
  insert trigger on records (Postgres: the statement trigger's function is replaced; SQLite: a
  fourth row trigger) keeps it too; the records already stored are added here, one day
  partition at a time on Postgres (a quarter hour lies in one day: exact).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service import audit_partitions, audit_rollups

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.create_table(
        "rollup_quarters",
        sa.Column("quarter", sa.BigInteger, primary_key=True),
        sa.Column("verifier", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    if dialect == "postgresql":
        schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
        for statement in audit_rollups.postgres_trigger_statements(schema, runs=False, split_groups=False):
            op.execute(statement)
        sources = audit_partitions.record_tables(bind)
        for source in sources:
            op.execute(audit_rollups.quarters_statement("postgresql", f"(SELECT * FROM {source})"))
        op.execute("ANALYZE rollup_quarters")
    elif dialect == "sqlite":
        op.execute(audit_rollups.quarters_statement("sqlite", "(SELECT * FROM records)"))
        for statement in audit_rollups.sqlite_trigger_statements():
            op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("rollups are derived audit data: no downgrade")
