"""The `sql` verifier's Postgres dialect against a real Postgres server.

The server comes from env ASSAY_TEST_POSTGRES_URL, or `scripts/postgres.sh start` (a
private cluster on 127.0.0.1:54329) when it is unset."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sandboxes.base import SandboxError
from verifiers.base import TaskInvalid, Verdict, VerifyContext
from verifiers.registry import get
from verifiers.sql.execution import Statement
from verifiers.sql.postgres_backend import PostgresBackend, psycopg_url
from verifiers.sql.task import SqlTask
from verifiers.sql.verifier import SqlVerifier

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parent.parent
SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary NUMERIC(8,2), boss INTEGER);"
INSTANCES = [
    "INSERT INTO emp VALUES (1,'ann','ops',10.0,NULL),(2,'bob','dev',20.0,1),(3,'cat','dev',20.0,1),"
    "(4,'dan','dev',30,2);",
    "INSERT INTO emp VALUES (1,'eve','dev',5.0,NULL),(2,'fay','ops',7.5,1),(3,'gus','dev',5.0,1);",
]
HONEST = "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("ASSAY_TEST_POSTGRES_URL")
    if not url:
        started = subprocess.run([str(REPO / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True,
                                 timeout=600)
        if started.returncode != 0:
            pytest.fail(f"scripts/postgres.sh start failed: {started.stderr[-2000:]}")
        url = started.stdout.strip().splitlines()[-1]
    yield url
    get("sql").close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def ctx(postgres_url: str, sandbox) -> VerifyContext:
    return VerifyContext(sandbox, services={"sql_postgres": postgres_url})


def task(**fields: object) -> SqlTask:
    raw = {"dialect": "postgres", "schema": SCHEMA, "instances": INSTANCES, "gold": HONEST, **fields}
    parsed = get("sql").parse_task(raw)
    assert isinstance(parsed, SqlTask)
    return parsed


def judge(ctx: VerifyContext, t: SqlTask, *responses: str):
    return get("sql").verify_many(t, list(responses), ctx)


def test_issue_request_shape_on_postgres(ctx):
    t = get("sql").parse_task({
        "dialect": "postgres",
        "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL);",
        "instances": ["INSERT INTO emp VALUES (1,'ann','ops',10.0),(2,'bob','dev',20.0);",
                      "INSERT INTO emp VALUES (1,'cid','dev',5.0);"],
        "gold": "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name",
    })
    out = get("sql").verify(t, "```sql\nSELECT name FROM emp WHERE dept = 'dev' ORDER BY name\n```", ctx)
    assert out.verdict is Verdict.correct and out.reward(t) == 1.0
    assert out.usage["backend"] == "postgres"


def test_comparison_traps_on_postgres(ctx):
    t = task(gold="SELECT name, salary FROM emp WHERE dept = 'dev' ORDER\nBY salary DESC, name")
    outs = judge(ctx, t,
                 "SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY name",  # wrong order
                 "SELECT DISTINCT name, salary FROM emp WHERE dept = 'dev' ORDER BY 2 DESC, 1",  # no dupes here: fine
                 "SELECT name, salary::float8 FROM emp WHERE dept = 'dev' ORDER BY salary DESC, name",  # 20 == 20.0
                 "SELECT name, salary::text FROM emp WHERE dept = 'dev' ORDER BY salary DESC, name",  # '20' != 20
                 "SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY salary DESC, name")
    assert [o.verdict for o in outs] == [Verdict.incorrect, Verdict.correct, Verdict.correct, Verdict.incorrect,
                                         Verdict.correct]
    dupes = task(gold="SELECT salary FROM emp WHERE dept = 'dev'")
    distinct, honest = judge(ctx, dupes, "SELECT DISTINCT salary FROM emp WHERE dept = 'dev'",
                             "SELECT salary FROM emp WHERE dept = 'dev'")
    assert distinct.verdict is Verdict.incorrect and honest.verdict is Verdict.correct
    hard_coded, = judge(ctx, task(), "SELECT unnest(ARRAY['bob','cat','dan'])")
    assert hard_coded.verdict is Verdict.incorrect and "instance_dependent" in hard_coded.flags
    nulls = task(gold="SELECT name, boss FROM emp ORDER BY id")
    coalesced, honest = judge(ctx, nulls, "SELECT name, coalesce(boss, 0) FROM emp ORDER BY id",
                              "SELECT name, boss FROM emp ORDER BY id")
    assert coalesced.verdict is Verdict.incorrect and honest.verdict is Verdict.correct
    with pytest.raises(TaskInvalid, match="empty on every instance"):
        judge(ctx, task(gold="SELECT name FROM emp WHERE dept = 'sales'"), "SELECT name FROM emp WHERE false")


def test_unsafe_statements_are_violations_on_postgres(ctx):
    t = task()
    attacks = [
        "DROP TABLE emp",
        "SELECT name FROM emp; DROP TABLE emp",
        "WITH gone AS (DELETE FROM emp RETURNING name) SELECT name FROM gone",
        "SELECT * INTO stolen FROM emp",
        "SELECT set_config('statement_timeout', '0', false)",
        "SELECT pg_read_file('/etc/passwd')",
        "COPY emp TO PROGRAM 'id'",
        "SET ROLE postgres",
        "SELECT * FROM emp FOR UPDATE",
    ]
    *outs, honest = judge(ctx, t, *attacks, HONEST)
    for sql, out in zip(attacks, outs, strict=True):
        assert out.verdict is Verdict.violation, (sql, out.evidence)
        assert out.reward(t) == 0.0
    assert honest.verdict is Verdict.correct


def _table_state(url: str) -> list[tuple]:
    """Every evaluation table and every row in it, as the admin sees them."""
    with psycopg.connect(psycopg_url(url).rsplit("/", 1)[0] + "/assay_sql", autocommit=True) as conn:
        tables = conn.execute("SELECT schemaname, tablename FROM pg_tables "
                              "WHERE schemaname LIKE 'assay_s_%' ORDER BY 1, 2").fetchall()
        rows = [row for schema, table in tables
                for row in conn.execute(f'SELECT * FROM "{schema}"."{table}" ORDER BY 1').fetchall()]
    return tables + rows


def test_runtime_guards_on_postgres_when_the_parser_is_bypassed(postgres_url):
    """Defence in depth: the runner role and read-only transactions refuse what the
    classifier would have stopped; the evaluation data is unchanged afterwards."""
    backend = PostgresBackend(postgres_url)
    try:
        t = task()
        hostile = [
            "DROP TABLE emp", "DELETE FROM emp", "UPDATE emp SET salary = 0",
            "WITH gone AS (DELETE FROM emp RETURNING name) SELECT name FROM gone",
            "SELECT pg_read_file('/etc/passwd')", "SELECT * FROM pg_authid", "CREATE TABLE x(a int)",
            "CREATE TEMP TABLE x AS SELECT 1", "SELECT lo_import('/etc/passwd')",
            "SELECT set_config('default_transaction_read_only', 'off', false), nextval('nope')",
        ]
        backend.execute(t, [Statement(HONEST)], VerifyContext(None))  # type: ignore[arg-type]
        before = _table_state(postgres_url)
        run = backend.execute(t, [Statement(s) for s in [*hostile, HONEST]], VerifyContext(None))  # type: ignore[arg-type]
        for instance in run.instances:
            *attacks, honest = instance.results
            for sql, result in zip(hostile, attacks, strict=True):
                assert not result.ok, sql
                assert result.kind in ("denied", "error"), (sql, result)
            assert honest.ok and honest.rows
        assert _table_state(postgres_url) == before
        with psycopg.connect(psycopg_url(postgres_url), autocommit=True) as admin:
            roles = admin.execute("SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles "
                                  "WHERE rolname LIKE %s", (f"assay_%_{backend.token}",)).fetchall()
        assert roles and all(not (s or d or r) for _, s, d, r in roles)
    finally:
        backend.close()


def test_runner_role_itself_cannot_write_even_outside_a_read_only_transaction(postgres_url):
    """The innermost layer: the role responses run as holds SELECT and nothing more."""
    from verifiers.sql.postgres_backend import DATABASE, _with

    backend = PostgresBackend(postgres_url)
    try:
        t = task()
        backend.execute(t, [Statement(HONEST)], VerifyContext(None))  # type: ignore[arg-type]
        space = backend._space(t)
        url = _with(backend.eval_url, user=space.runner, password=space.password, database=DATABASE)
        for sql in ("DELETE FROM emp", "DROP TABLE emp", "CREATE TABLE x(a int)", "ALTER TABLE emp ADD COLUMN z int",
                    "SET ROLE postgres", "CREATE SCHEMA mine", "COPY emp TO PROGRAM 'id'",
                    "CREATE TEMP TABLE x(a int)"):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(psycopg.sql.SQL("SET search_path = {}").format(psycopg.sql.Identifier(space.schemas[0])))
                conn.execute("BEGIN READ WRITE")
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
    finally:
        backend.close()


def test_runaway_query_times_out_and_stops_on_the_server(ctx, postgres_url):
    t = task(timeout_s=1.0)
    started = time.monotonic()
    runaway, sleeper, honest = judge(
        ctx, t, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        "SELECT pg_sleep(30)", HONEST)
    assert time.monotonic() - started < 8.0
    assert runaway.verdict is Verdict.timeout and sleeper.verdict is Verdict.timeout
    assert runaway.evidence["instances"][1]["failure"] == "skipped"
    assert honest.verdict is Verdict.correct
    with psycopg.connect(psycopg_url(postgres_url), autocommit=True) as admin:
        busy = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'assay_r_%' "
                             "AND state = 'active'").fetchone()
    assert busy == (0,)  # nothing still burning CPU on the server


def test_huge_cross_join_hits_the_row_cap_on_postgres(ctx):
    t = task(max_rows=500)
    huge, honest = judge(ctx, t, "SELECT * FROM emp a, emp b, emp c, emp d, emp e", HONEST)
    assert huge.verdict is Verdict.incorrect
    assert huge.evidence["instances"][0]["failure"] == "too_large"
    assert honest.verdict is Verdict.correct


def test_mutation_on_postgres_rolls_back(ctx, postgres_url):
    t = task(mode="mutation", gold="UPDATE emp SET salary = salary * 2 WHERE dept = 'dev'")
    outs = judge(ctx, t, "UPDATE emp SET salary = 2 * salary WHERE dept = 'dev'",
                 "UPDATE emp SET salary = salary * 2",
                 "DELETE FROM emp WHERE dept = 'dev'",
                 "TRUNCATE emp",
                 "UPDATE emp SET salary = salary * 2 WHERE dept = 'dev'")
    assert [o.verdict for o in outs] == [Verdict.correct, Verdict.incorrect, Verdict.incorrect, Verdict.violation,
                                         Verdict.correct]
    # Every attempt was rolled back: the same gold change is still what the data allows.
    assert judge(ctx, t, "UPDATE emp SET salary = salary * 2 WHERE dept = 'dev'")[0].verdict is Verdict.correct


def test_predicate_task_on_postgres(ctx):
    t = task(gold=None, predicate={"sql": "c2 >= 20", "columns": 2, "row_count": {"min": 1}})
    good, bad = judge(ctx, t, "SELECT name, salary FROM emp WHERE salary >= 20 OR dept = 'dev'",
                      "SELECT name, salary FROM emp")
    assert bad.verdict is Verdict.incorrect
    # On the second instance no row has salary >= 20, so the first answer fails there.
    assert good.verdict is Verdict.incorrect and "instance_dependent" in good.flags
    exact = task(gold=None, instances=INSTANCES[:1], predicate={"sql": "c2 >= 20", "row_count": {"min": 3}})
    assert judge(ctx, exact, "SELECT name, salary FROM emp WHERE salary >= 20")[0].verdict is Verdict.correct


def test_missing_admin_url_is_an_infrastructure_error(sandbox):
    verifier = SqlVerifier()
    with pytest.raises(SandboxError, match="ASSAY_SQL_POSTGRES_URL"):
        verifier.verify(task(), HONEST, VerifyContext(sandbox))


def test_postgres_task_through_the_http_service(postgres_url, tmp_path):
    from service.testing.app import AppServer, app_settings

    server = AppServer(app_settings(tmp_path, sql_postgres_url=postgres_url)).start()
    try:
        with server.client() as client:
            reply = client.post("/v1/groups", json={"groups": [{
                "verifier": "sql",
                "task": {"dialect": "postgres", "schema": SCHEMA, "instances": INSTANCES, "gold": HONEST},
                "responses": [HONEST, "SELECT name FROM emp ORDER BY name", "DROP TABLE emp"],
            }]})
            assert reply.status_code == 200, reply.text
            assert [r["verdict"] for r in reply.json()["groups"][0]["results"]] == ["correct", "incorrect",
                                                                                   "violation"]
    finally:
        server.stop()


def test_objects_left_by_a_killed_process_are_swept(postgres_url):
    """A server killed without closing leaves its roles and schemas; the next backend
    finds their advisory lock free and drops them (and leaves live backends' alone)."""
    import sys

    live = PostgresBackend(postgres_url)
    try:
        live.execute(task(), [Statement(HONEST)], VerifyContext(None))  # type: ignore[arg-type]
        script = (
            "import os, sys\n"
            "from verifiers.sql.postgres_backend import PostgresBackend\n"
            "from verifiers.sql.execution import Statement\n"
            "from verifiers.registry import get\n"
            "task = get('sql').parse_task({'dialect': 'postgres', 'schema': 'CREATE TABLE t(a int);',\n"
            "                              'instances': ['INSERT INTO t VALUES (1);'], 'gold': 'SELECT a FROM t'})\n"
            f"backend = PostgresBackend({postgres_url!r})\n"
            "backend.execute(task, [Statement('SELECT a FROM t')], None)\n"
            "print(backend.token, flush=True)\n"
            "os._exit(0)\n"
        )
        dead = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert dead.returncode == 0, dead.stderr
        token = dead.stdout.strip()

        def owned(tok: str) -> int:
            with psycopg.connect(psycopg_url(postgres_url), autocommit=True) as admin:
                return admin.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE %s",
                                     (f"assay_%_{tok}",)).fetchone()[0]

        assert owned(token) == 2
        sweeper = PostgresBackend(postgres_url)
        try:
            sweeper.execute(task(gold="SELECT 1"), [Statement("SELECT 1")], VerifyContext(None))  # type: ignore[arg-type]
            assert owned(token) == 0
            assert owned(live.token) == 2  # a live backend's objects stay
        finally:
            sweeper.close()
    finally:
        live.close()
