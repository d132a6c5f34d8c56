"""Audit viewer (issue 13): group statistics on records, viewer sessions, keyset indexes.

Records keep what the caller was told about their group (advantage, mean, std, zero
variance); `ui_sessions` holds signed-in viewers (hash of the cookie token, key id, CSRF
token); (column, seq) indexes serve the viewer's filtered and sorted keyset pages. On
Postgres, multivariate statistics let the planner see rare combinations of verifier, verdict
and caller. (A GIN index on flags, which the 1M-record bench used, is left out until the
model can declare it: the schema test compares models and revisions.)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

KEYSET_INDEXES = {
    "ix_records_verifier_seq": ["verifier", "seq"],
    "ix_records_verdict_seq": ["verdict", "seq"],
    "ix_records_caller_seq": ["caller_key_id", "seq"],
    "ix_records_reward_seq": ["reward", "seq"],
    "ix_records_duration_seq": ["duration_ms", "seq"],
}


def upgrade() -> None:
    op.add_column("records", sa.Column("advantage", sa.Float))
    op.add_column("records", sa.Column("group_mean", sa.Float))
    op.add_column("records", sa.Column("group_std", sa.Float))
    op.add_column("records", sa.Column("group_zero_variance", sa.Boolean))
    for name, columns in KEYSET_INDEXES.items():
        op.create_index(name, "records", columns)
    op.create_table(
        "ui_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE STATISTICS IF NOT EXISTS records_filter_stats (mcv, dependencies) "
                   "ON verifier, verdict, caller_key_id FROM records")


def downgrade() -> None:
    raise NotImplementedError("records' group statistics are audit data: no downgrade")
