"""The audit at ten million records, tenth part (issue 27 item 3): a run's records by reward.

- `ix_records_run_reward_seq`: the records of training runs (`run_id IS NOT NULL`) by run, then
  reward, then seq. A records page filtered by a run and sorted by reward walked the reward's index
  over every record, testing each row against the run (and any other filter) in the heap: at 10M
  records 0.7-1.7 s from disk for a run's or a key's first page, and 5-11 s even cached for a verdict
  against the reward's grain (`verdict=incorrect&run=...` by highest reward: every correct record
  first). Now it walks the run's own entries in the reward's order, and on Postgres the index holds
  the verdict, verifier, key and time (`RUN_REWARD_INCLUDED`), so a page's keys come from it alone
  however far a filter sends the walk (the records page reads them first, then the page's rows).
- No index by (run, latency): tried in the same round, it made the planner walk a run's latency
  entries past every other verifier's for `verifier=math&run=...` by slowest (2 ms -> 220 ms
  cached, 5.7 s cold), since latency follows the verifier; revision 0013's (verifier, latency)
  index serves that page.

Built on every partition, one pass over each.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.tables import RUN_RECORDS, RUN_REWARD_INCLUDED

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

def upgrade() -> None:
    where = sa.text(RUN_RECORDS)
    op.create_index("ix_records_run_reward_seq", "records", ["run_id", "reward", "seq"], if_not_exists=True,
                    postgresql_where=where, sqlite_where=where, postgresql_include=list(RUN_REWARD_INCLUDED))


def downgrade() -> None:
    op.drop_index("ix_records_run_reward_seq", table_name="records")
