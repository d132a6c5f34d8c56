"""Postgres: TRUNCATE of records is refused too (row triggers never see a TRUNCATE).

SQLite has no TRUNCATE: its DELETE without WHERE fires the delete trigger of 0001.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS records_no_truncate ON records")
        op.execute("CREATE TRIGGER records_no_truncate BEFORE TRUNCATE ON records "
                   "FOR EACH STATEMENT EXECUTE FUNCTION assay_records_append_only()")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS records_no_truncate ON records")
