"""Postgres privileges of the service's role: it appends and reads records, never changes them.

The schema owner (who runs `assay db upgrade`) owns every table, the append-only trigger
and its function; only an owner can drop or disable a trigger or replace the function.
The service connects as a separate role granted here: ordinary DML on the other tables,
SELECT and INSERT only on the append-only ones. Grants cover the tables that exist, so
they are (re)applied after each upgrade. SQLite has no roles: there the triggers are the
only guard, and anyone with write access to the file can bypass them.
"""

from __future__ import annotations

import sqlalchemy as sa

# Tables whose rows are never updated, deleted or truncated by the service.
APPEND_ONLY_TABLES = ("records",)


class RoleRefused(ValueError):
    """The role cannot be the restricted service role (missing, superuser, or the owner)."""


def grant_service_role(engine: sa.Engine, role: str) -> None:
    if engine.dialect.name != "postgresql":
        raise RoleRefused("a separate service role needs Postgres; on SQLite the triggers are the only guard")
    with engine.begin() as conn:
        found = conn.execute(sa.text("SELECT rolsuper, rolname = current_user, rolbypassrls FROM pg_roles "
                                     "WHERE rolname = :role"), {"role": role}).first()
        if found is None:
            raise RoleRefused(f"role {role!r} does not exist: create it (LOGIN, no superuser) first")
        if found[0] or found[1] or found[2]:
            raise RoleRefused(f"role {role!r} must not be a superuser or the schema owner")
        schema = conn.execute(sa.text("SELECT current_schema()")).scalar_one()
        quote = conn.dialect.identifier_preparer.quote
        who, where = quote(role), quote(schema)
        for statement in (
            f"REVOKE CREATE ON SCHEMA {where} FROM PUBLIC",
            f"REVOKE ALL ON ALL TABLES IN SCHEMA {where} FROM {who}",
            f"GRANT USAGE ON SCHEMA {where} TO {who}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {where} TO {who}",
            f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {where} TO {who}",
            f"REVOKE INSERT, UPDATE, DELETE ON alembic_version FROM {who}",
            *(f"REVOKE UPDATE, DELETE, TRUNCATE ON {quote(table)} FROM {who}" for table in APPEND_ONLY_TABLES),
        ):
            conn.exec_driver_sql(statement)
