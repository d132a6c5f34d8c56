"""Postgres privileges of the service's role: least privilege, from one written allow-list.

The schema owner (who runs `assay db upgrade`) owns every table, trigger and function;
only an owner can drop or disable a trigger or replace its function. The service connects
as a separate role that gets exactly `APP_PRIVILEGES` and nothing else:

- every table that holds history or decides a reward (records, the task blobs behind
  them, registered tasks, labels, evals, API keys, idempotent answers, and what other
  issues add, e.g. key revocations) may be read and appended to, never updated, deleted
  or truncated. Revoking a key is an INSERT into the append-only `key_revocations`.
- `env_sessions` is working state (an open tool environment's calls so far), not
  history: it changes as calls are made and goes when it expires.
- `ui_sessions` holds viewer sign-ins (token hashes): signing out deletes one. Deleting
  a sign-in changes no record and no reward; it is granted that and no UPDATE.

A table that is not listed gets nothing at all, so a new table fails loudly until it
is added here, and `tests/test_postgres_roles.py` compares the role's privileges on
every table with this list. SQLite has no roles: there the triggers are the only guard,
and anyone with write access to the file can bypass them.
"""

from __future__ import annotations

import sqlalchemy as sa

READ = frozenset({"SELECT"})
APPEND_ONLY = frozenset({"SELECT", "INSERT"})
WORKING_STATE = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"})

# table -> what the service's role may do on it. Extend at merge when a table is added.
APP_PRIVILEGES: dict[str, frozenset[str]] = {
    "records": APPEND_ONLY,
    "task_blobs": APPEND_ONLY,
    "tasks": APPEND_ONLY,
    "labels": APPEND_ONLY,
    "evals": APPEND_ONLY,
    "api_keys": APPEND_ONLY,
    "key_revocations": APPEND_ONLY,  # issue 22: revocation is an event, never an UPDATE
    "idempotency": APPEND_ONLY,
    "audit_heads": APPEND_ONLY,  # issue 21: signed chain heads
    "certificates": APPEND_ONLY,  # issue 25: a newer certificate supersedes
    "verifier_diffs": APPEND_ONLY,
    # issue 26: alarm settings of a run, changed in place (they decide alarms, never a reward).
    "run_thresholds": frozenset({"SELECT", "INSERT", "UPDATE"}),
    "run_alarms": APPEND_ONLY,
    "env_sessions": WORKING_STATE,
    "ui_sessions": frozenset({"SELECT", "INSERT", "DELETE"}),
    # issue 27: derived from records by the insert trigger (a SECURITY DEFINER function of the
    # owner), so the service's role only reads them; archives are written by the owner.
    "rollup_hours": READ,
    "rollup_tasks": READ,
    "rollup_task_hours": READ,
    "rollup_quarters": READ,
    "rollup_run_steps": READ,
    "rollup_split_groups": READ,
    # issue 27: a run page's computed step figures, stored by the read that computed them
    # (replaced when the step's records change; derived data, never a reward).
    "run_step_figures": WORKING_STATE,
    "run_held_out_figures": WORKING_STATE,  # revision 0019: a run's held-out rows, the same way
    "bootstrap_intervals": WORKING_STATE,  # revision 0019: seeded intervals by their inputs' digest
    "record_keys": READ,
    "labelled_records": READ,  # revision 0020: kept by the labels' insert trigger (SECURITY DEFINER)
    "audit_archives": READ,
    "alembic_version": READ,
}
# Sequences behind autoincrement keys: take the next value, nothing else (no setval).
SEQUENCE_PRIVILEGES = frozenset({"USAGE"})



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
        tables = conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}).scalars()
        quote = conn.dialect.identifier_preparer.quote
        who, where = quote(role), quote(schema)
        statements = [
            f"REVOKE CREATE ON SCHEMA {where} FROM PUBLIC",
            f"REVOKE ALL ON ALL TABLES IN SCHEMA {where} FROM {who}",
            f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {where} FROM {who}",
            f"GRANT USAGE ON SCHEMA {where} TO {who}",
            f"GRANT {', '.join(sorted(SEQUENCE_PRIVILEGES))} ON ALL SEQUENCES IN SCHEMA {where} TO {who}",
        ]
        for table in sorted(tables):
            allowed = APP_PRIVILEGES.get(table)
            if allowed:
                statements.append(f"GRANT {', '.join(sorted(allowed))} ON {quote(table)} TO {who}")
        for statement in statements:
            conn.exec_driver_sql(statement)
