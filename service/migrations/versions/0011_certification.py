"""Task certification and the verifier release gate (issue 25): certificates and diff reports.

Both tables are append-only audit data: a newer certificate (or report) supersedes, nothing
is changed in place.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.migrations import append_only_statements

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "certificates",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("task_hash", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(200)),
        sa.Column("verifier", sa.String(64), nullable=False),
        sa.Column("verifier_version", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reasons", sa.JSON, nullable=False),
        sa.Column("reference_runs", sa.JSON, nullable=False),
        sa.Column("probes", sa.JSON, nullable=False),
        sa.Column("caller_key_id", sa.String(64)),
        sa.Column("counts", sa.Boolean, nullable=False),
    )
    op.create_index("ix_certificates_task_hash_seq", "certificates", ["task_hash", "seq"])
    op.create_table(
        "verifier_diffs",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("verifier", sa.String(64), nullable=False),
        sa.Column("verifier_version", sa.String(32), nullable=False),
        sa.Column("report", sa.JSON, nullable=False),
        sa.Column("caller_key_id", sa.String(64)),
    )
    op.create_index("ix_verifier_diffs_verifier_seq", "verifier_diffs", ["verifier", "seq"])
    for table in ("certificates", "verifier_diffs"):
        for statement in append_only_statements(op.get_bind().dialect.name, table):
            op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("certificates and diff reports are append-only audit data: no downgrade")
