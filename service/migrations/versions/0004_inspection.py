"""Inspection (issue 12): flag evidence and generation facts on records, reviewers'
labels and held-out evaluation runs, both append-only like records.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.migrations import append_only_statements

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)
APPEND_ONLY = ("labels", "evals")


def upgrade() -> None:
    op.add_column("records", sa.Column("flag_evidence", sa.JSON))
    op.add_column("records", sa.Column("tokens", sa.Integer))
    op.add_column("records", sa.Column("finish_reason", sa.String(32)))
    op.add_column("records", sa.Column("masked", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("records", sa.Column("eval_id", sa.String(32)))
    op.create_index("ix_records_eval_id", "records", ["eval_id"])
    op.create_table(
        "labels",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("record_id", sa.String(32), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("author_key_id", sa.String(64), nullable=False),
        sa.Column("label", sa.String(16), nullable=False),
        sa.Column("corrected_verdict", sa.String(32)),
        sa.Column("pattern", sa.String(100)),
        sa.Column("note", sa.Text),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_labels_record", "labels", ["record_id"])
    op.create_table(
        "evals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("checkpoint", sa.String(200), nullable=False),
        sa.Column("caller_key_id", sa.String(64)),
        sa.Column("layout", sa.JSON, nullable=False),
    )
    for table in APPEND_ONLY:
        for statement in append_only_statements(op.get_bind().dialect.name, table):
            op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("inspection tables are append-only audit data: no downgrade")
