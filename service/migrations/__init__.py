"""Schema migrations of the audit store (Alembic), and the start-up check.

Revisions live in `service/migrations/versions/`, one chain with one head. A brand-new
empty database is created at head on first use (so the embedded quick start needs no
extra step); a database with tables but behind head is refused with a message naming
`assay db upgrade`, which is the only thing that changes an existing schema.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Any 64-bit constant: serialises concurrent first starts on one Postgres database.
_PG_LOCK_KEY = 0x61737361795F6462


def append_only_statements(dialect: str, table: str) -> list[str]:
    """Triggers that refuse UPDATE, DELETE (and TRUNCATE) on an audit table, as records have (0001, 0002)."""
    if dialect == "sqlite":
        return [f"CREATE TRIGGER IF NOT EXISTS {table}_append_only_{op_.lower()} BEFORE {op_} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'audit {table} are append-only'); END" for op_ in ("UPDATE", "DELETE")]
    if dialect == "postgresql":
        return [f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION assay_records_append_only()",
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION assay_records_append_only()"]
    return []


class SchemaOutOfDate(RuntimeError):
    """The database's schema revision is not the one this code needs."""


def alembic_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads {heads}: chain new revisions after the one head")
    return heads[0]


def current_revision(connection: sa.Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _known(revision: str) -> bool:
    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except Exception:  # alembic raises its own errors for unknown or malformed ids
        return False


def _is_empty(connection: sa.Connection) -> bool:
    return not [t for t in sa.inspect(connection).get_table_names() if t != "alembic_version"]


@contextmanager
def _exclusive(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection that alone may migrate this database until the block ends."""
    database = engine.url.database or ""
    if engine.dialect.name == "sqlite" and database and database != ":memory:":
        with open(f"{database}.migrate-lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with engine.connect() as connection:
                yield connection
        return
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        yield connection


def _upgrade(connection: sa.Connection) -> None:
    command.upgrade(alembic_config(connection), "head")
    connection.commit()


def new_revision(message: str) -> str:
    """Write an empty revision chained after the head; returns its path."""
    script = command.revision(alembic_config(), message=message, rev_id=f"{int(head_revision()) + 1:04d}")
    return script.path  # type: ignore[union-attr]


def upgrade(engine: sa.Engine) -> tuple[str | None, str]:
    """Bring the database to head; returns (revision before, revision after)."""
    with _exclusive(engine) as connection:
        before = current_revision(connection)
        _upgrade(connection)
        return before, head_revision()


def prepare(engine: sa.Engine) -> None:
    """Create an empty database at head; refuse one whose schema is not at head."""
    head = head_revision()
    with _exclusive(engine) as connection:
        current = current_revision(connection)
        if current == head:
            return
        where = engine.url.render_as_string(hide_password=True)
        if current is None and _is_empty(connection):
            try:
                _upgrade(connection)
            except sa.exc.DBAPIError as exc:  # e.g. the service's restricted role may not create tables
                raise SchemaOutOfDate(f"the audit database {where} is empty and this role cannot create the schema "
                                      f"({type(exc.orig).__name__}): run `assay db upgrade` as the schema owner"
                                      ) from exc
            return
        if current is not None and not _known(current):
            raise SchemaOutOfDate(f"the audit database {where} has revision {current}, newer than this Assay "
                                  f"(head {head}): run a release that knows it")
        found = f"revision {current}" if current else "a schema from before migrations (release 0.1.0)"
        raise SchemaOutOfDate(f"the audit database {where} has {found}; this Assay needs revision {head}. "
                              "Run `assay db upgrade` (as the schema owner) to migrate it.")
