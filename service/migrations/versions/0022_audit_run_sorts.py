"""The audit at ten million records, tenth part (issue 27 item 3): a run's records by reward and latency.

- `ix_records_run_reward_seq` and `ix_records_run_duration_seq`: the records of training runs
  (`run_id IS NOT NULL`) by run, then reward (latency), then seq. A records page filtered by a run
  and sorted by reward or latency walked the sort's index over every record, testing each row
  against the run (and any other filter) in the heap: at 10M records, 0.4-1.7 s from disk for the
  first page (`/work/notes/s14/run_sorts_cold.py`, docs/benchmarks.md round 13). Now it walks the
  run's own entries in the sort's order and stops at the page.

Each index is built on every partition, one pass over each.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.tables import RUN_RECORDS

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

INDEXES = {"ix_records_run_reward_seq": "reward", "ix_records_run_duration_seq": "duration_ms"}


def upgrade() -> None:
    where = sa.text(RUN_RECORDS)
    for name, column in INDEXES.items():
        op.create_index(name, "records", ["run_id", column, "seq"], if_not_exists=True, postgresql_where=where,
                        sqlite_where=where)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="records")
