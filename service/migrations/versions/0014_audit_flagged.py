"""The audit at ten million records, third part (issue 27): flagged records.

- `ix_records_flagged_seq`: a partial index on records that carry at least one flag
  (`json_array_length(flags) > 0`, about 2% of a campaign's records), keyed by seq. A flag
  filter (`AuditStore.has_flag`) repeats the index's predicate, so a flag filter walks only
  the flagged records instead of every record of a verifier or verdict. On Postgres the index
  also holds the columns the records filters and sorts read (verifier, verdict, caller key,
  time, latency, reward, flags), so a flag page is answered from the index alone.
- `ix_records_eval_seq`: the same for the records of evaluation runs (`eval_id` set, about 1%
  of records): an `eval` filter in any sort reads the page's keys from this index alone.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

FLAGGED = "json_array_length(flags) > 0"
INCLUDED = ["verifier", "verdict", "caller_key_id", "created_at", "duration_ms", "reward", "flags"]
EVAL = "eval_id IS NOT NULL"


def upgrade() -> None:
    # On Postgres built on every partition (one pass over each).
    op.create_index("ix_records_flagged_seq", "records", ["seq"], if_not_exists=True,
                    postgresql_include=INCLUDED, postgresql_where=sa.text(FLAGGED), sqlite_where=sa.text(FLAGGED))
    op.create_index("ix_records_eval_seq", "records", ["eval_id", "seq"], if_not_exists=True,
                    postgresql_include=["created_at", "duration_ms", "reward"], postgresql_where=sa.text(EVAL),
                    sqlite_where=sa.text(EVAL))


def downgrade() -> None:
    op.drop_index("ix_records_eval_seq", table_name="records")
    op.drop_index("ix_records_flagged_seq", table_name="records")
