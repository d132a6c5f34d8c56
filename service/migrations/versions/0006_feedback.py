"""Hidden stays hidden (issue 20): records keep the feedback a policy was shown.

`evidence` stays the full audit view; `feedback` is what `reward` keys were answered with.
Records written before have no feedback (NULL) and keep the plain SHA-256 task hashes they
were written with; newer ones name tasks by keyed fingerprints (service/fingerprints.py).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("records", sa.Column("feedback", sa.JSON))


def downgrade() -> None:
    raise NotImplementedError("records' feedback is audit data: no downgrade")
