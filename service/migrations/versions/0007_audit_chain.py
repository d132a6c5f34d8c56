"""Tamper-evident log (issue 21): hash chains on records, labels and evals; signed chain heads.

Each chained table gets four nullable columns (chain id, index in the chain, the previous
row's hash, this row's hash) and a unique index on (chain id, index); records also keep
the digest of their task blob. Rows written before this revision keep NULLs: they are
outside every chain, and `assay audit verify` reports them as unchained. `audit_heads`
holds the signed heads, append-only like records.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.migrations import append_only_statements

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CHAINED = ("records", "labels", "evals")


def upgrade() -> None:
    for table in CHAINED:
        op.add_column(table, sa.Column("chain_id", sa.String(64)))
        op.add_column(table, sa.Column("chain_index", sa.Integer))
        op.add_column(table, sa.Column("chain_prev", sa.String(64)))
        op.add_column(table, sa.Column("chain_hash", sa.String(64)))
        op.create_index(f"uq_{table}_chain", table, ["chain_id", "chain_index"], unique=True)
    op.add_column("records", sa.Column("task_digest", sa.String(64)))
    op.create_table(
        "audit_heads",
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("chain_table", sa.String(32), nullable=False),
        sa.Column("chain_id", sa.String(64), nullable=False),
        sa.Column("chain_index", sa.Integer, nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("signature", sa.String(100), nullable=False),
    )
    for statement in append_only_statements(op.get_bind().dialect.name, "audit_heads"):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the audit chains are audit data: no downgrade")
