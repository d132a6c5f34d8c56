"""The audit at ten million records, ninth part (issue 27 item 3): flagged records in every sort.

- `ix_records_flagged_reward_seq` and `ix_records_flagged_duration_seq`: the flagged records
  (0014's partial index predicate) by reward and by latency. A flag filter sorted by reward or
  latency used to gather every record with the flag (and the other filters) from the heap and sort
  them: ~6,800 rows from ~10,900 pages for `flag=forbidden_tool&key=...` at 10M records, 0.2-1.7 s
  when those pages are not cached. Walking one of these indexes it stops at the page.
- `ix_records_flagged_seq` rebuilt holding every column the records page filters by
  (`FLAGGED_INCLUDED`, service/tables.py; 0014 held no task, group, evaluation or run), so a flag
  filter with a run, task or group filter reads its page's keys from the index alone too.

The included columns are Postgres's (SQLite indexes hold none; there the two new indexes are plain
partial indexes). Each index is built on every partition, one pass over each; the rebuild is skipped
where the index already holds the run (a database upgraded once, stamped back, upgraded again).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.tables import FLAGGED, flagged_included

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    where = sa.text(FLAGGED)
    if bind.dialect.name == "postgresql":
        definition = bind.execute(sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_records_flagged_seq' "
                                          "AND schemaname = current_schema()")).scalar()
        if definition is not None and "run_id" not in definition:
            op.drop_index("ix_records_flagged_seq", table_name="records")
        op.create_index("ix_records_flagged_seq", "records", ["seq"], if_not_exists=True,
                        postgresql_include=flagged_included("seq"), postgresql_where=where)
    for column in ("reward", "duration_ms"):
        name = "ix_records_flagged_reward_seq" if column == "reward" else "ix_records_flagged_duration_seq"
        op.create_index(name, "records", [column, "seq"], if_not_exists=True, postgresql_where=where,
                        sqlite_where=where, postgresql_include=flagged_included(column, "seq"))


def downgrade() -> None:
    # ix_records_flagged_seq keeps its wider columns: 0020 reads it the same way.
    op.drop_index("ix_records_flagged_duration_seq", table_name="records")
    op.drop_index("ix_records_flagged_reward_seq", table_name="records")
