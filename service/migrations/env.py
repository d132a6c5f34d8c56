"""Alembic environment: runs revisions on the connection `service.migrations` hands in."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `assay db upgrade` (service.migrations), which supplies the connection")
context.configure(connection=connection, target_metadata=None, render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
