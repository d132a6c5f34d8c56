"""Baseline: the schema of release 0.1.0, with the append-only triggers on records.

Databases made by 0.1.0 (before migrations) already hold these tables: each is created
only where it is missing, so `assay db upgrade` adopts such a database as it is.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)

APPEND_ONLY_TRIGGERS = {
    "sqlite": [
        "CREATE TRIGGER IF NOT EXISTS records_append_only_update BEFORE UPDATE ON records "
        "BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END",
        "CREATE TRIGGER IF NOT EXISTS records_append_only_delete BEFORE DELETE ON records "
        "BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END",
    ],
    "postgresql": [
        "CREATE OR REPLACE FUNCTION assay_records_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'audit records are append-only'; END $$",
        "DROP TRIGGER IF EXISTS records_append_only ON records",
        "CREATE TRIGGER records_append_only BEFORE UPDATE OR DELETE ON records "
        "FOR EACH ROW EXECUTE FUNCTION assay_records_append_only()",
    ],
}


def _tables() -> dict[str, tuple]:
    return {
        "records": (
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("id", sa.String(32), nullable=False),
            sa.Column("created_at", _TZ, nullable=False),
            sa.Column("request_id", sa.String(200)),
            sa.Column("caller_key_id", sa.String(64)),
            sa.Column("task_id", sa.String(200)),
            sa.Column("task_hash", sa.String(64), nullable=False),
            sa.Column("task_public", sa.JSON, nullable=False),
            sa.Column("verifier", sa.String(64), nullable=False),
            sa.Column("verifier_version", sa.String(32), nullable=False),
            sa.Column("response_hash", sa.String(64), nullable=False),
            sa.Column("response", sa.Text),
            sa.Column("components", sa.JSON, nullable=False),
            sa.Column("reward", sa.Float, nullable=False),
            sa.Column("verdict", sa.String(32), nullable=False),
            sa.Column("evidence", sa.JSON, nullable=False),
            sa.Column("flags", sa.JSON, nullable=False),
            sa.Column("sandbox_backend", sa.String(32), nullable=False),
            sa.Column("usage", sa.JSON),
            sa.Column("duration_ms", sa.Float, nullable=False),
            sa.Column("group_id", sa.String(64)),
            sa.Column("group_index", sa.Integer),
            sa.UniqueConstraint("caller_key_id", "request_id", name="uq_records_caller_request"),
            sa.UniqueConstraint("id"),
        ),
        "task_blobs": (
            sa.Column("task_hash", sa.String(64), primary_key=True),
            sa.Column("verifier", sa.String(64), nullable=False),
            sa.Column("task", sa.JSON, nullable=False),
        ),
        "tasks": (
            sa.Column("task_id", sa.String(200), primary_key=True),
            sa.Column("verifier", sa.String(64), nullable=False),
            sa.Column("task_hash", sa.String(64), nullable=False),
            sa.Column("created_at", _TZ, nullable=False),
        ),
        "api_keys": (
            sa.Column("key_id", sa.String(64), primary_key=True),
            sa.Column("secret_hash", sa.String(64), nullable=False),
            sa.Column("scopes", sa.String(200), nullable=False),
            sa.Column("name", sa.String(200)),
            sa.Column("created_at", _TZ, nullable=False),
            sa.Column("revoked", sa.Boolean, nullable=False),
        ),
        "idempotency": (
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("caller_key_id", sa.String(64), nullable=False),
            sa.Column("key", sa.String(200), nullable=False),
            sa.Column("request_hash", sa.String(64), nullable=False),
            sa.Column("response", sa.JSON, nullable=False),
            sa.Column("created_at", _TZ, nullable=False),
            sa.UniqueConstraint("caller_key_id", "key", name="uq_idempotency"),
        ),
    }


_RECORD_INDEXES = {"ix_records_created": "created_at", "ix_records_verdict": "verdict",
                   "ix_records_verifier": "verifier", "ix_records_group": "group_id", "ix_records_task": "task_id"}


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, columns in _tables().items():
        if name in existing:
            continue
        op.create_table(name, *columns)
        if name == "records":
            for index, column in _RECORD_INDEXES.items():
                op.create_index(index, "records", [column])
    for statement in APPEND_ONLY_TRIGGERS.get(op.get_bind().dialect.name, []):
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the baseline is not downgraded: the audit log is append-only")
