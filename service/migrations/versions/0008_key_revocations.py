"""Key revocations (issue 22): an append-only table, one row per revocation.

Revoking a key INSERTs a row (key id, time, by whom, why); nothing updates `api_keys`, so
the service's database role may keep INSERT/SELECT only on history tables. A key is
revoked when it has a row here (or, for keys revoked before this table, its old
`revoked` column is set).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.migrations import append_only_statements

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "key_revocations",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_by", sa.String(200), nullable=False),
        sa.Column("reason", sa.String(500)),
    )
    op.create_index("ix_key_revocations_key", "key_revocations", ["key_id"])
    # A revocation is an event: it cannot be taken back by editing or deleting it.
    for statement in append_only_statements(op.get_bind().dialect.name, "key_revocations"):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("revocations are audit data: no downgrade")
