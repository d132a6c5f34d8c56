"""Training runs (issue 26): the run and step on records, per-run alarm thresholds and the
alarms raised on runs.

Records get `run_id` and `run_step` (null for records without a run) and one index
(run_id, run_step, seq): every per-run query filters on the run and groups by step, and
a step's (count, last seq) — whether anything was added to it since it was computed — is
read from the index alone.
`run_thresholds` holds what a team set for a run (replaced by a later setting);
`run_alarms` one row per (run, rule, subject), written the first time the rule held, and
append-only like records (the same triggers as labels and evals, 0004).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.migrations import append_only_statements

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("records", sa.Column("run_id", sa.String(200)))
    op.add_column("records", sa.Column("run_step", sa.Integer))
    op.create_index("ix_records_run_step", "records", ["run_id", "run_step", "seq"])
    op.create_table(
        "run_thresholds",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("thresholds", sa.JSON, nullable=False),
        sa.Column("caller_key_id", sa.String(64)),
        sa.Column("updated_at", _TZ, nullable=False),
    )
    op.create_table(
        "run_alarms",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("rule", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("raised_at", _TZ, nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_id", "rule", "subject", name="uq_run_alarms"),
    )
    for statement in append_only_statements(op.get_bind().dialect.name, "run_alarms"):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("runs' tags and alarms are audit data: no downgrade")
