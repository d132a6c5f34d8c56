"""The audit at ten million records, seventh part (issue 27 item 3): groups across hours counted once.

- `rollup_split_groups` (service/audit_rollups.py): per group whose rows lie in more than one
  UTC hour, its tallies per hour (judged rows, raw correctness min and max). Task statistics
  over a time window add up the per-hour task rollups, which count a group once in each hour it
  has rows in; with this table they count it once in the window, its zero variance judged over
  its rows inside the window (service/task_stats.py), as the records say. Kept as records are
  written: Postgres by the insert trigger (its function is replaced), SQLite by the record
  writer (service/batch_rollups.py runs `rollup_statements`).
- Back-fill: one pass over the stored records that belong to a group (no per-run computation;
  ~30 s on the 10M database when its pages are cached, docs/operations.md). Most groups are
  written in one request, so the table stays small (none of the 10M bench's groups cross an hour).
- `run_held_out_figures` (service/runs.py): a run's held-out rows (per evaluation, task and
  answer: judged, correct, reward sum), stored by the read that computed them with the change mark
  of the run's held-out records, as `run_step_figures` stores steps (revision 0018); the first
  read of a run page in a fresh process no longer groups the run's held-out records (~0.5-0.66 s at
  10M). Created empty: each run's first read after the upgrade computes and stores them.
- `bootstrap_intervals` (service/bootstrap_store.py): the `reward_up_heldout_down` rule's bootstrap
  interval by the digest of its inputs (seeded: a pure function of them), so a fresh process reads
  it instead of resampling again (0.35-0.5 s a run at 10M). Created empty.
- `ix_rollup_hours_kind_key` (kind, key, verifier, hour, n): the review queue's strata per hour
  read from the index alone, not by a scan of every rollup row (~50 ms at 10M records).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service import audit_rollups

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "rollup_split_groups",
        sa.Column("group_id", sa.String(64), primary_key=True),
        sa.Column("caller_key_id", sa.String(64), primary_key=True),
        sa.Column("task_hash", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("hour", sa.BigInteger, primary_key=True),
        sa.Column("verifier", sa.String(64), nullable=False),
        sa.Column("judged", sa.BigInteger, nullable=False),
        sa.Column("cor_min", sa.Float, nullable=True),
        sa.Column("cor_max", sa.Float, nullable=True),
    )
    op.create_index("ix_rollup_split_groups_hour", "rollup_split_groups", ["hour"])
    # The review queue's strata per hour from this index alone (280k rollup rows at 10M records: ~1 s).
    op.create_index("ix_rollup_hours_kind_key", "rollup_hours", ["kind", "key", "verifier", "hour", "n"])
    op.create_table(
        "run_held_out_figures",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("figures", sa.Text, nullable=False),
    )
    op.create_table(
        "bootstrap_intervals",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("lo", sa.Float, nullable=False),
        sa.Column("hi", sa.Float, nullable=False),
    )
    if bind.dialect.name == "postgresql":
        schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
        for statement in audit_rollups.postgres_trigger_statements(schema):
            op.execute(statement)
        op.execute("SET LOCAL work_mem = '256MB'")  # the grouped records hashed in memory, not sorted on disk
    op.execute(audit_rollups.split_groups_backfill(bind.dialect.name))


def downgrade() -> None:
    raise NotImplementedError("rollups are derived audit data: no downgrade")
