"""The audit at ten million records, eighth part (issue 27 item 3): labelled records apart.

- `labelled_records` (service/labelled_records.py): per labelled record, the fields the records
  filters and sorts and the review queue's strata read (seq, time, verifier, verdict, reward,
  latency, flags, key, task, group, evaluation, run), written by an insert trigger on `labels`.
  A label filter's page and the review queue's labelled counts read this table (one row per
  labelled record, ~5,000 at 10M records) instead of each labelled record from its day
  partition: the first such read in a process took ~0.5 s at 1M records and ~1-1.5 s at 10M
  with the pages on disk. Back-filled from the stored labels (one read per labelled record).
- `ix_records_eval_seq` rebuilt holding every column the records page filters or sorts by
  (`EVAL_INCLUDED`, service/tables.py; 0014 held time, latency and reward), so an evaluation
  filter with a verdict, verifier, key, flag, task, group or run filter reads its page's keys
  from the index alone (evaluation records are ~1% of records) instead of a heap row per
  evaluation record it walks. Postgres only (SQLite indexes hold no included columns); the
  rebuild reads every partition once and holds writes to `records` while it runs.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service import audit_partitions, labelled_records
from service.tables import EVAL_INCLUDED

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "labelled_records",
        sa.Column("record_id", sa.String(32), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verifier", sa.String(64), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("reward", sa.Float, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("flags", sa.JSON, nullable=False),
        sa.Column("caller_key_id", sa.String(64), nullable=True),
        sa.Column("task_id", sa.String(200), nullable=True),
        sa.Column("task_hash", sa.String(64), nullable=False),
        sa.Column("group_id", sa.String(64), nullable=True),
        sa.Column("eval_id", sa.String(32), nullable=True),
        sa.Column("run_id", sa.String(200), nullable=True),
        sa.Column("run_step", sa.Integer, nullable=True),
    )
    postgres = bind.dialect.name == "postgresql"
    partitioned = postgres and audit_partitions.is_partitioned(bind)
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one() if postgres else None
    for statement in labelled_records.trigger_statements(bind.dialect.name, schema, partitioned):
        op.execute(statement)
    op.execute(labelled_records.backfill_statement(partitioned))
    if postgres:
        op.drop_index("ix_records_eval_seq", table_name="records")
        op.create_index("ix_records_eval_seq", "records", ["eval_id", "seq"], postgresql_include=list(EVAL_INCLUDED),
                        postgresql_where=sa.text("eval_id IS NOT NULL"))


def downgrade() -> None:
    raise NotImplementedError("labelled_records is derived audit data: no downgrade")
