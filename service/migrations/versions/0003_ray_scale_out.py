"""Scale-out (issue 14): records unique per (request, response index); environment
sessions in the database so that every API replica serves every session.

`records` gets two nullable columns (no rewrite of existing rows, whose values stay
NULL and so never collide) and a unique index; SQLite adds both without rebuilding the
table, so the append-only triggers stay as they are.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("records", sa.Column("submission_id", sa.String(32)))
    op.add_column("records", sa.Column("submission_index", sa.Integer))
    op.create_index("uq_records_submission_index", "records", ["submission_id", "submission_index"], unique=True)
    op.create_table(
        "env_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("caller_key_id", sa.String(64), nullable=False),
        sa.Column("opened", sa.JSON, nullable=False),
        sa.Column("calls", sa.JSON, nullable=False),
        sa.Column("trace_chars", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("touched_at", sa.Float, nullable=False),
        sa.Column("finishing_since", sa.Float),
        sa.Column("result", sa.JSON),
    )
    op.create_index("ix_env_sessions_caller", "env_sessions", ["caller_key_id"])


def downgrade() -> None:
    raise NotImplementedError("not downgraded: the audit log is append-only")
