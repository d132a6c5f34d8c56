"""The audit at ten million records, sixth part (issue 27 item 3): a run page's step figures kept.

- `run_step_figures` (service/runs.py): per training run and step, the figures the run page
  and `GET /v1/runs/{id}` show (`RunStep` as JSON), with the step's change mark they were
  computed at (its stored records and highest seq: `rollup_run_steps` on Postgres, the records'
  (run_id, run_step, seq) index on SQLite) and the figures' version. A read uses a stored step
  only while its mark and version are unchanged, and stores what it had to compute, so the
  first read of a run in a fresh process no longer computes every step from the records (10-38 s
  at ten million records). The figures are computed exactly as before, by the same statements:
  the length quarters and the distinct answers per group are not sums, so they are not
  maintained by the insert trigger; a step is computed again once its records change (a write,
  an archive).
- No back-fill: the table starts empty and each step is computed by its first read after the
  upgrade, as before this revision, then stored. Filling every run's steps inside the upgrade's
  transaction took 27 minutes on the 10M database (docs/benchmarks.md), an upgrade an operator
  would have to wait through for figures that the first read computes anyway.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_step_figures",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("figures", sa.Text, nullable=True),
    )


def downgrade() -> None:
    raise NotImplementedError("derived audit data: no downgrade")
