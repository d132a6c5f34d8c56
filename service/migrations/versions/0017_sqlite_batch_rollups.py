"""The SQLite rollups once per committed batch instead of per row (issue 27 item 1).

Drops the four per-row AFTER INSERT triggers that kept the rollup tables on SQLite
(`records_rollups`, `records_rollups_tasks`, `records_rollups_task_hours`,
`records_rollups_quarters`; service/audit_rollups.py `SQLITE_TRIGGERS`). From this revision on
the record writer adds each transaction's new records to the rollups itself, with the same
statements, inside the same transaction (service/batch_rollups.py). The rollups stored so far
stay as they are (they equal the records). Postgres is untouched: its statement trigger
already runs once per insert statement.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from service.audit_rollups import SQLITE_TRIGGERS

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")


def downgrade() -> None:
    raise NotImplementedError("rollups are derived audit data: no downgrade")
