"""Postgres tasks: executed from the trusted side over TCP (the sandbox has no network).

Isolation, per task, created by this backend with the admin URL of the setting
`ASSAY_SQL_POSTGRES_URL` (handed over in VerifyContext.services):

* one schema per instance in a dedicated database (`assay_sql`) that PUBLIC may not use;
* an *owner* role (no superuser, no CREATEDB/CREATEROLE) that alone loads the task's
  schema and data scripts, over its own login, so task SQL never runs as the admin;
* a *runner* role for responses and the gold: SELECT only on the task's schemas (plus
  INSERT/UPDATE/DELETE for mutation tasks), `default_transaction_read_only` for query
  tasks, `statement_timeout`, `temp_file_limit` and a connection limit set on the role.

Every attempt runs in its own transaction, with `SET LOCAL statement_timeout`, through a
server-side cursor (so a huge result is fetched in bounded chunks, never materialised
here), and is rolled back. Mutation tasks are judged on the row-level difference seen
inside that transaction before the rollback.
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import psycopg
from psycopg import errors
from psycopg import sql as pgsql

from sandboxes.base import SandboxError
from verifiers.base import VerifyContext
from verifiers.sql.compare import Row, Single, Tagged
from verifiers.sql.execution import Execution, InstanceRun, Statement, StatementResult, TableDiff
from verifiers.sql.inside.rowdiff import hashable, pick
from verifiers.sql.task import SqlTask

DATABASE = "assay_sql"
FETCH_CHUNK = 256
MAX_TASKS = 32
RUNNER_CONNECTIONS = 4
BUILD_TIMEOUT_MS = 10_000
# Advisory-lock namespace ("ASSY"): each backend holds (namespace, its token) on its admin
# session while it lives, so objects whose token's lock is free belong to a dead process.
LOCK_NAMESPACE = 0x41535359


def psycopg_url(url: str) -> str:
    """Accept SQLAlchemy-style URLs (`postgresql+psycopg://`) as well as plain ones."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.split("+")[0]))


def _with(url: str, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    netloc_user = user if user is not None else (parts.username or "")
    netloc_pass = password if password is not None else (parts.password or "")
    auth = netloc_user + (f":{netloc_pass}" if netloc_pass else "")
    netloc = f"{auth}@{host}" if auth else host
    if parts.port:
        netloc += f":{parts.port}"
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


# Postgres' type oid of `real` (float4): its values are single precision.
FLOAT4_OID = 700


def single_precision_columns(description: Any) -> list[bool]:
    return [d.type_code == FLOAT4_OID for d in description or ()]


def normalize_row(row: Any, single: list[bool]) -> Row:
    """A row's values to the comparison model, float4 values marked as `Single`."""
    return tuple(Single(v) if is_single and isinstance(v, float) else normalize(v)
                 for v, is_single in zip(row, single, strict=True))


def normalize(value: Any) -> Any:
    """Postgres values to the comparison model: numbers stay numbers (Decimal exact),
    bytes stay bytes, temporal/uuid/json/arrays become tagged canonical text."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, Decimal):
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, datetime | date | dtime):
        return Tagged(type(value).__name__, value.isoformat())
    if isinstance(value, timedelta):
        return Tagged("interval", str(value.total_seconds()))
    if isinstance(value, UUID):
        return Tagged("uuid", str(value))
    if isinstance(value, dict | list):
        return Tagged("json" if isinstance(value, dict) else "array", json.dumps(value, sort_keys=True, default=str))
    return Tagged(type(value).__name__, str(value))



@dataclass
class _TaskSpace:
    key: str
    owner: str
    runner: str
    password: str
    schemas: list[str]
    build_errors: list[str | None]
    befores: list[dict[str, tuple[list[str], list[Row]]] | None] = field(default_factory=list)
    pool: queue.SimpleQueue[psycopg.Connection] = field(default_factory=queue.SimpleQueue)
    # The runner role's connection limit, enforced here so that callers wait, not fail.
    slots: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(RUNNER_CONNECTIONS))
    ready: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None


class PostgresBackend:
    def __init__(self, admin_url: str) -> None:
        self.admin_url = psycopg_url(admin_url)
        self.eval_url = _with(self.admin_url, database=DATABASE)
        # Per-process token: two service processes never share (or drop) each other's objects.
        self.token = secrets.token_hex(3)
        self._spaces: OrderedDict[str, _TaskSpace] = OrderedDict()
        self._lock = threading.Lock()
        self._admin_lock = threading.Lock()
        self._admin: psycopg.Connection | None = None
        self._database_ready = False

    # ------------------------------------------------------------------ admin side

    @contextmanager
    def _admin_conn(self) -> Iterator[psycopg.Connection]:
        with self._admin_lock:
            try:
                if self._admin is None or self._admin.closed:
                    self._admin = psycopg.connect(self.eval_url if self._database_ready else self.admin_url,
                                                  autocommit=True, connect_timeout=10)
                    if self._database_ready:
                        self._admin.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_NAMESPACE, int(self.token, 16)))
                yield self._admin
            except psycopg.OperationalError as exc:
                self._admin = None
                raise SandboxError("the postgres server for SQL tasks is unreachable",
                                   cause="postgres_unavailable") from exc

    def _ensure_database(self) -> None:
        if self._database_ready:
            return
        with self._admin_conn() as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                with contextlib.suppress(errors.DuplicateDatabase):
                    admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(DATABASE)))
            admin.close()
            self._admin = None
            self._database_ready = True
        with self._admin_conn() as admin:
            # Only the roles granted CONNECT may use the evaluation database, and nobody
            # but schema owners may create objects in it.
            admin.execute(pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(pgsql.Identifier(DATABASE)))
            admin.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        self._sweep_stale()

    def _sweep_stale(self) -> None:
        """Drop the schemas and roles of backends whose process is gone (a killed server
        never ran `close`): their advisory lock is free."""
        with self._admin_conn() as admin:
            rows = admin.execute(
                r"SELECT rolname FROM pg_roles WHERE rolname ~ '^assay_[or]_[0-9a-f]{12}_[0-9a-f]{6}$'")
            tokens = {name.rsplit("_", 1)[1] for (name,) in rows.fetchall()} - {self.token}
            for token in sorted(tokens):
                key = (LOCK_NAMESPACE, int(token, 16))
                if not admin.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()[0]:
                    continue  # its backend is alive
                try:
                    schemas = admin.execute(r"SELECT nspname FROM pg_namespace WHERE nspname ~ %s",
                                            (rf"^assay_s_[0-9a-f]{{12}}_{token}_[0-9]+$",)).fetchall()
                    roles = admin.execute(r"SELECT rolname FROM pg_roles WHERE rolname ~ %s",
                                          (rf"^assay_[or]_[0-9a-f]{{12}}_{token}$",)).fetchall()
                    for (schema,) in schemas:
                        admin.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
                    for (role,) in roles:
                        admin.execute(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(role)))
                        admin.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(role)))
                except psycopg.Error:
                    pass  # another process may be sweeping the same leftovers
                finally:
                    admin.execute("SELECT pg_advisory_unlock(%s, %s)", key)

    def _space(self, task: SqlTask) -> _TaskSpace:
        key = task.task_hash()[:12]
        with self._lock:
            space = self._spaces.get(key)
            fresh = space is None
            if fresh:
                name = f"{key}_{self.token}"
                space = _TaskSpace(
                    key=key, owner=f"assay_o_{name}", runner=f"assay_r_{name}", password=secrets.token_urlsafe(24),
                    schemas=[f"assay_s_{name}_{i}" for i in range(len(task.instances))],
                    build_errors=[None] * len(task.instances),
                )
                self._spaces[key] = space
            self._spaces.move_to_end(key)
            evicted = []
            while len(self._spaces) > MAX_TASKS:
                evicted.append(self._spaces.popitem(last=False)[1])
        for old in evicted:
            self._drop(old)
        assert space is not None
        if fresh:
            try:
                self._create(task, space)
            except Exception as exc:
                space.error = exc
                with self._lock:
                    self._spaces.pop(key, None)
                raise
            finally:
                space.ready.set()
        space.ready.wait()
        if space.error is not None:
            raise SandboxError("the postgres task schema could not be set up", cause="postgres_setup_failed")
        return space

    def _create(self, task: SqlTask, space: _TaskSpace) -> None:
        self._ensure_database()
        ident = pgsql.Identifier
        with self._admin_conn() as admin:
            for role in (space.owner, space.runner):
                admin.execute(
                    pgsql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT "
                              "NOREPLICATION NOBYPASSRLS CONNECTION LIMIT {} PASSWORD {}").format(
                        ident(role), pgsql.Literal(RUNNER_CONNECTIONS + 2), pgsql.Literal(space.password)
                    )
                )
                admin.execute(pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident(DATABASE), ident(role)))
            timeout_ms = int(task.timeout_s * 1000)
            settings = {
                "statement_timeout": f"{timeout_ms}",
                "lock_timeout": f"{timeout_ms}",
                "idle_in_transaction_session_timeout": "60000",
                "temp_file_limit": "65536",  # kB
                "work_mem": "16384",  # kB
                "default_transaction_read_only": "on" if task.mode == "query" else "off",
            }
            for name, value in settings.items():
                admin.execute(pgsql.SQL("ALTER ROLE {} SET {} = {}").format(
                    ident(space.runner), ident(name), pgsql.Literal(value)))
            for schema in space.schemas:
                admin.execute(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident(schema), ident(space.owner)))
        for number, schema in enumerate(space.schemas):
            space.build_errors[number] = self._load(task, space, schema, task.instances[number])
        space.befores = [
            self._snapshot_as_owner(space, schema) if task.mode == "mutation" and space.build_errors[i] is None
            else None
            for i, schema in enumerate(space.schemas)
        ]

    def _owner_connect(self, space: _TaskSpace, schema: str) -> psycopg.Connection:
        return psycopg.connect(
            _with(self.eval_url, user=space.owner, password=space.password), autocommit=True, connect_timeout=10,
            options=f"-c search_path={schema} -c statement_timeout={BUILD_TIMEOUT_MS}",
        )

    def _load(self, task: SqlTask, space: _TaskSpace, schema: str, script: str) -> str | None:
        """Load the task's schema and one instance's data, as the owner role only."""
        ident = pgsql.Identifier
        try:
            with self._owner_connect(space, schema) as conn:
                conn.execute(task.schema_sql)
                conn.execute(script)
                grants = "SELECT, INSERT, UPDATE, DELETE" if task.mode == "mutation" else "SELECT"
                conn.execute(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(schema), ident(space.runner)))
                conn.execute(pgsql.SQL(f"GRANT {grants} ON ALL TABLES IN SCHEMA {{}} TO {{}}").format(
                    ident(schema), ident(space.runner)))
                if task.mode == "mutation":
                    conn.execute(pgsql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(
                        ident(schema), ident(space.runner)))
        except psycopg.Error as exc:
            return str(exc).strip()
        return None

    def _snapshot_as_owner(self, space: _TaskSpace, schema: str) -> dict[str, tuple[list[str], list[Row]]]:
        with self._owner_connect(space, schema) as conn:
            return _snapshot(conn, schema)

    def _drop(self, space: _TaskSpace) -> None:
        while True:
            try:
                space.pool.get_nowait().close()
            except queue.Empty:
                break
        ident = pgsql.Identifier
        try:
            with self._admin_conn() as admin:
                for role in (space.runner, space.owner):
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                for schema in space.schemas:
                    admin.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident(schema)))
                for role in (space.runner, space.owner):
                    admin.execute(pgsql.SQL("DROP OWNED BY {}").format(ident(role)))
                    admin.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(ident(role)))
        except (psycopg.Error, SandboxError):
            pass  # best effort: the objects are named per process and hold no secrets

    def close(self) -> None:
        with self._lock:
            spaces = list(self._spaces.values())
            self._spaces.clear()
        for space in spaces:
            self._drop(space)
        with self._admin_lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None

    # ------------------------------------------------------------------ attempts

    @contextmanager
    def _runner(self, space: _TaskSpace) -> Iterator[psycopg.Connection]:
        if not space.slots.acquire(timeout=120):
            raise SandboxError("no postgres runner connection free within 120 s", cause="postgres_busy")
        try:
            try:
                conn = space.pool.get_nowait()
            except queue.Empty:
                try:
                    conn = psycopg.connect(_with(self.eval_url, user=space.runner, password=space.password),
                                           connect_timeout=10)
                except psycopg.OperationalError as exc:
                    raise SandboxError("a postgres runner connection failed", cause="postgres_unavailable") from exc
            healthy = False
            try:
                yield conn
                healthy = not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            finally:
                if healthy:
                    space.pool.put(conn)
                else:
                    conn.close()
        finally:
            space.slots.release()

    def execute(self, task: SqlTask, statements: list[Statement], ctx: VerifyContext) -> Execution:
        space = self._space(task)
        runs = []
        started = time.monotonic()
        timed_out: set[int] = set()
        for number, schema in enumerate(space.schemas):
            if space.build_errors[number] is not None:
                runs.append(InstanceRun(build_error=space.build_errors[number]))
                continue
            results: list[StatementResult] = []
            for index, statement in enumerate(statements):
                if index in timed_out:
                    # A statement that ran out of time once is not given the time again.
                    results.append(StatementResult(False, "skipped", "skipped after a timeout"))
                    continue
                with self._runner(space) as conn:
                    if task.mode == "mutation":
                        before = space.befores[number]
                        assert before is not None
                        results.append(self._mutate(conn, task, schema, statement.sql, before))
                    else:
                        results.append(self._query(conn, task, schema, statement))
                if results[-1].kind == "timeout":
                    timed_out.add(index)
            runs.append(InstanceRun(results=results))
        return Execution(runs, {"backend": "postgres", "wall_s": round(time.monotonic() - started, 4)})

    def _begin(self, conn: psycopg.Connection, task: SqlTask, schema: str) -> None:
        conn.execute("BEGIN READ ONLY" if task.mode == "query" else "BEGIN")
        conn.execute(pgsql.SQL("SET LOCAL search_path = {}").format(pgsql.Identifier(schema)))
        conn.execute(pgsql.SQL("SET LOCAL statement_timeout = {}").format(pgsql.Literal(int(task.timeout_s * 1000))))

    def _query(self, conn: psycopg.Connection, task: SqlTask, schema: str, statement: Statement) -> StatementResult:
        try:
            self._begin(conn, task, schema)
            result = _fetch(conn, statement.sql, task)
            if result.ok and statement.predicate:
                names = ", ".join(f"c{i + 1}" for i in range(len(result.columns)))
                check = _fetch(conn, f"WITH result({names}) AS (\n{statement.sql}\n)\n"
                                     f"SELECT count(*) FROM result WHERE NOT coalesce(({statement.predicate}), false)",
                               task)
                if not check.ok:
                    check.error = "predicate check failed: " + check.error
                    result = check
                else:
                    result.predicate_failures = int(check.rows[0][0])
            return result
        except psycopg.Error as exc:
            return _failure(exc)
        finally:
            _rollback(conn)

    def _mutate(self, conn: psycopg.Connection, task: SqlTask, schema: str, sql: str,
                before: dict[str, tuple[list[str], list[Row]]]) -> StatementResult:
        try:
            self._begin(conn, task, schema)
            conn.execute(sql)
            after = _snapshot(conn, schema)
        except psycopg.Error as exc:
            return _failure(exc)
        finally:
            _rollback(conn)
        diff: dict[str, TableDiff] = {}
        total = 0
        for table, (columns, rows) in before.items():
            new_rows = after.get(table, (columns, []))[1]
            old, new = Counter(hashable(r) for r in rows), Counter(hashable(r) for r in new_rows)
            if old == new:
                continue
            removed, added = pick(rows, old - new), pick(new_rows, new - old)
            total += len(removed) + len(added)
            diff[table] = TableDiff(columns, removed, added)
        if total > task.max_rows:
            return StatementResult(False, "too_large", "the change exceeds the result caps")
        return StatementResult(True, diff=diff)



def _rollback(conn: psycopg.Connection) -> None:
    try:
        conn.rollback()
    except psycopg.Error:
        conn.close()


def _failure(exc: psycopg.Error) -> StatementResult:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, errors.QueryCanceled):
        return StatementResult(False, "timeout", text)
    if isinstance(exc, errors.InsufficientPrivilege | errors.ReadOnlySqlTransaction):
        return StatementResult(False, "denied", text)
    if isinstance(exc, errors.OutOfMemory | errors.DiskFull | errors.ConfigurationLimitExceeded):
        return StatementResult(False, "resource", text)
    return StatementResult(False, "error", text)


def _fetch(conn: psycopg.Connection, sql: str, task: SqlTask) -> StatementResult:
    # A named (server-side) cursor: rows are produced as we fetch them, within caps.
    with conn.cursor(name=f"attempt_{secrets.token_hex(4)}") as cursor:
        cursor.execute(sql)
        columns = [d.name for d in cursor.description or ()]
        single = single_precision_columns(cursor.description)
        rows: list[Row] = []
        size = 0
        # statement_timeout bounds each FETCH; this bounds them all together.
        deadline = time.monotonic() + task.timeout_s
        while True:
            if time.monotonic() > deadline:
                return StatementResult(False, "timeout", "fetching the result ran past the time limit")
            chunk = cursor.fetchmany(FETCH_CHUNK)
            if not chunk:
                break
            for row in chunk:
                normalized = normalize_row(row, single)
                size += sum(len(v) + 4 if isinstance(v, str | bytes) else 12 for v in normalized)
                rows.append(normalized)
            if len(rows) > task.max_rows or size > task.max_result_bytes:
                return StatementResult(
                    False, "too_large", f"result exceeds the caps ({task.max_rows} rows, {task.max_result_bytes} bytes)"
                )
        return StatementResult(True, columns=columns, rows=rows)


def _snapshot(conn: psycopg.Connection, schema: str) -> dict[str, tuple[list[str], list[Row]]]:
    tables = [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,)).fetchall()]
    out: dict[str, tuple[list[str], list[Row]]] = {}
    for table in tables:
        query = pgsql.SQL("SELECT * FROM {}.{}").format(pgsql.Identifier(schema), pgsql.Identifier(table))
        cursor = conn.execute(query)
        single = single_precision_columns(cursor.description)
        out[table] = ([d.name for d in cursor.description or ()], [normalize_row(r, single) for r in cursor])
    return out
