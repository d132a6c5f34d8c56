"""The audit at ten million records, fifth part (issue 27): per-run figures kept as records are written.

- `rollup_run_steps` (service/audit_rollups.py): per training run and step, its stored records,
  how many are held-out, and the highest seq written there. The runs list, a run's record count
  and step range, and the run page's per-step change marks read it instead of the records'
  (run_id, run_step, seq) index (every record of every run at ten million records). Postgres:
  the insert trigger's function is replaced (it also writes rollup_run_steps) and the records
  already stored are added, one partition at a time. SQLite: the table is created and stays
  empty (those figures are a GROUP BY over the index at read time; the SQLite triggers are
  unchanged).
- `ix_records_run_eval` (run_id, eval_id; Postgres: seq included) over the held-out records
  only: the run page's held-out points read the run's evaluation records (~1% of them), not all
  its records, and whether they changed since the last read from this index alone.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service import audit_partitions, audit_rollups

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "rollup_run_steps",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("evals", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
    )
    # On Postgres built on every partition (one pass over each).
    op.create_index("ix_records_run_eval", "records", ["run_id", "eval_id"], if_not_exists=True,
                    postgresql_where=sa.text("eval_id IS NOT NULL"), sqlite_where=sa.text("eval_id IS NOT NULL"),
                    postgresql_include=["seq"])
    if bind.dialect.name != "postgresql":
        return
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
    for statement in audit_rollups.postgres_trigger_statements(schema, split_groups=False):
        op.execute(statement)
    sources = audit_partitions.record_tables(bind)
    for source in sources:  # a run's step may span partitions: the upsert adds them up
        op.execute(audit_rollups.run_steps_statement(source))
    op.execute("ANALYZE rollup_run_steps")


def downgrade() -> None:
    raise NotImplementedError("rollups are derived audit data: no downgrade")
