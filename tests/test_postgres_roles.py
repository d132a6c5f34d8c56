"""Least privilege in fact on Postgres: the service's role reads and appends history, and nothing more.

The schema owner runs `assay db upgrade --service-role ROLE`; the service connects as ROLE.
Its privileges on every table are compared with the written allow-list
(`service.db_roles.APP_PRIVILEGES`); anything else fails.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from service.audit_partitions import is_partition
from service.db_roles import APP_PRIVILEGES, SEQUENCE_PRIVILEGES
from service.testing.app import AppServer, app_settings
from service.testing.cli import run_cli
from service.testing.ui import csrf_field, sign_in
from tests.conftest import REPO
from tests.test_audit_postgres import postgres_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.postgres

RECORD = ("INSERT INTO records (id, created_at, task_hash, task_public, verifier, verifier_version, response_hash,"
          " components, reward, verdict, evidence, flags, sandbox_backend, duration_ms) VALUES ('{id}', now(), 'h',"
          " '{{}}', 'math', '1', 'h', '{{}}', 1.0, 'correct', '{{}}', '[]', 'process', 1.0)")


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


class Roles:
    def __init__(self, server_url: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.admin = libpq(server_url)
        self.owner, self.app, self.db = f"assay_owner_{suffix}", f"assay_app_{suffix}", f"assay_roles_{suffix}"
        base = server_url.rsplit("/", 1)[0].split("@", 1)[1]
        self.owner_url = f"postgresql+psycopg://{self.owner}@{base}/{self.db}"
        self.app_url = f"postgresql+psycopg://{self.app}@{base}/{self.db}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{self.owner}" LOGIN')
            conn.execute(f'CREATE ROLE "{self.app}" LOGIN')
            conn.execute(f'CREATE DATABASE "{self.db}" OWNER "{self.owner}"')

    def drop(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{self.app}"')
            conn.execute(f'DROP ROLE IF EXISTS "{self.owner}"')


@pytest.fixture
def roles(postgres_url: str) -> Iterator[Roles]:  # noqa: F811
    made = Roles(postgres_url)
    yield made
    made.drop()


def assay(url: str, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`assay ARGS` against `url`: in this process (service/testing/cli.py), or in a subprocess."""
    env = {"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": url}
    if not process:
        return run_cli(args, env)
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)


def serving(workdir, url: str) -> AppServer:
    """The service connected as the role of `url` (in-process: the role's privileges are under test)."""
    return AppServer(app_settings(workdir, database_url=url)).start()


def refused(url: str, statement: str, match: str) -> None:
    with pytest.raises(psycopg.Error, match=match), psycopg.connect(libpq(url)) as conn:
        conn.execute(statement)


def test_service_role_appends_and_reads_but_cannot_change_records(tmp_path, roles: Roles):
    # The restricted role cannot create the schema itself: the owner migrates (as an operator would: a process).
    upgraded = assay(roles.app_url, "db", "upgrade", "--url", roles.owner_url, "--service-role", roles.app,
                     process=True)
    assert upgraded.returncode == 0, upgraded.stderr

    server = serving(tmp_path, roles.app_url)
    try:
        with server.client() as c:
            r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "2"},
                                                       "responses": [r"\boxed{2}", r"\boxed{3}"]}]})
            assert r.status_code == 200, r.text
            first = r.json()["groups"][0]["results"][0]["record_id"]
            assert c.get(f"/v1/records/{first}").json()["verdict"] == "correct"
            # Everything the service does as this role still works: registering a task, a label.
            assert c.post("/v1/tasks", json={"task_id": "two", "verifier": "math",
                                             "task": {"answer": "2"}}).status_code in (200, 201)
        with server.client(server.create_key("review")) as reviewer:
            assert reviewer.post(f"/v1/records/{first}/labels", json={"label": "agree"}).status_code == 201
        # A viewer signs in and out (its sign-in row is the one thing this role may delete).
        browser = sign_in(server, server.admin_key)
        page = browser.get("/ui/records")
        assert page.status_code == 200
        assert browser.post("/ui/sign-out", data={"csrf_token": csrf_field(page.text)}).status_code == 303
        assert browser.get("/ui/records").status_code == 303
        browser.close()
    finally:
        server.stop()

    with psycopg.connect(libpq(roles.app_url)) as conn:
        conn.execute(RECORD.format(id="byapp"))
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM labels").fetchone()[0] == 1
    for statement, match in (
        ("UPDATE records SET reward = 0.5", "permission denied"),
        ("DELETE FROM records", "permission denied"),
        ("TRUNCATE records", "permission denied"),
        ("DROP TRIGGER records_append_only ON records", "must be owner"),
        ("ALTER TABLE records DISABLE TRIGGER records_append_only", "must be owner"),
        ("CREATE OR REPLACE FUNCTION assay_records_append_only() RETURNS trigger LANGUAGE plpgsql AS "
         "$$ BEGIN RETURN NEW; END $$", "must be owner|permission denied"),
        ("DROP TABLE records", "must be owner"),
        ("CREATE TABLE records_copy (id text)", "permission denied"),
        ("UPDATE alembic_version SET version_num = '0001'", "permission denied"),
    ):
        refused(roles.app_url, statement, match)
    # The owner is held by the triggers.
    for statement in ("UPDATE records SET reward = 0.5", "DELETE FROM records", "TRUNCATE records"):
        refused(roles.owner_url, statement, "append-only")
    with psycopg.connect(libpq(roles.owner_url)) as conn:
        assert conn.execute("SELECT count(*), sum(reward) FROM records").fetchone() == (3, 2.0)


def test_restricted_role_is_told_to_ask_the_owner(roles: Roles):
    started = assay(roles.app_url, "serve", "--port", "1", process=True)
    assert started.returncode != 0
    assert "assay db upgrade" in started.stderr, started.stderr


@pytest.mark.parametrize("who", ["owner", "superuser", "missing"])
def test_service_role_must_be_a_separate_plain_role(roles: Roles, who: str):
    role = {"owner": roles.owner, "superuser": "postgres", "missing": "nobody_" + uuid.uuid4().hex[:6]}[who]
    done = assay(roles.owner_url, "db", "upgrade", "--service-role", role)
    assert done.returncode == 2 and "error:" in done.stderr and role in done.stderr


PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


def test_app_role_has_exactly_the_written_allow_list(roles: Roles):
    upgraded = assay(roles.app_url, "db", "upgrade", "--url", roles.owner_url, "--service-role", roles.app)
    assert upgraded.returncode == 0, upgraded.stderr
    with psycopg.connect(libpq(roles.owner_url)) as conn:
        relations = [row[0] for row in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1")]
        held = {table: {p for p in PRIVILEGES if conn.execute(
                    "SELECT has_table_privilege(%s, quote_ident(%s), %s)", (roles.app, table, p)).fetchone()[0]}
                for table in relations}
        sequences = {name: {p for p in ("USAGE", "SELECT", "UPDATE") if conn.execute(
                        "SELECT has_sequence_privilege(%s, quote_ident(%s), %s)", (roles.app, name, p)).fetchone()[0]}
                     for (name,) in conn.execute("SELECT sequencename FROM pg_sequences "
                                                 "WHERE schemaname = current_schema()")}
        column_grants = conn.execute(
            "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid, "
            "aclexplode(a.attacl) x WHERE x.grantee = %s::regrole", (roles.app,)).fetchall()
        owned = conn.execute("SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", (roles.app,)).fetchone()[0]
        owned += conn.execute("SELECT count(*) FROM pg_proc WHERE proowner = %s::regrole", (roles.app,)).fetchone()[0]
        member_of = conn.execute("SELECT roleid::regrole::text FROM pg_auth_members WHERE member = %s::regrole",
                                 (roles.app,)).fetchall()
        schema_create = conn.execute("SELECT has_schema_privilege(%s, current_schema(), 'CREATE')",
                                     (roles.app,)).fetchone()[0]
        database_create = conn.execute("SELECT has_database_privilege(%s, current_database(), 'CREATE')",
                                       (roles.app,)).fetchone()[0]

    # Partitions of records (revision 0012): nothing on them; every access goes through `records`.
    partitions = [t for t in relations if is_partition(t)]
    assert partitions and all(held.pop(t) == set() for t in partitions), partitions
    relations = [t for t in relations if not is_partition(t)]
    unlisted = sorted(set(relations) - set(APP_PRIVILEGES))
    assert not unlisted, f"tables missing from service.db_roles.APP_PRIVILEGES: {unlisted}"
    assert {"records", "task_blobs", "tasks", "labels", "evals", "api_keys", "idempotency"} <= set(relations)
    assert held == {table: set(APP_PRIVILEGES[table]) for table in relations}
    assert sequences and all(granted == set(SEQUENCE_PRIVILEGES) for granted in sequences.values()), sequences
    assert (column_grants, owned, member_of, schema_create, database_create) == ([], 0, [], False, False)
    # Whatever holds history or decides a reward is append-only for the service, by the list itself.
    for table in ("records", "task_blobs", "tasks", "labels", "evals", "api_keys", "idempotency", "key_revocations"):
        assert APP_PRIVILEGES[table] == {"SELECT", "INSERT"}, table


def test_app_role_cannot_rewrite_what_decides_a_reward(tmp_path, roles: Roles):
    upgraded = assay(roles.app_url, "db", "upgrade", "--url", roles.owner_url, "--service-role", roles.app)
    assert upgraded.returncode == 0, upgraded.stderr
    server = serving(tmp_path, roles.app_url)
    try:
        with server.client() as c:
            assert c.post("/v1/tasks", json={"task_id": "add", "verifier": "math",
                                             "task": {"answer": "5"}}).status_code in (200, 201)
            r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task_id": "add",
                                                       "responses": [r"\boxed{5}", r"\boxed{6}"]}]})
            assert r.status_code == 200 and r.json()["groups"][0]["rewards"] == [1.0, 0.0], r.text
    finally:
        server.stop()
    # What a compromised API would try: swap the hidden answer behind old records (replay
    # would then judge something else), re-point a task id, raise a key's scopes, drop a label.
    for statement in (
        "UPDATE task_blobs SET task = '{\"answer\": \"6\"}'",
        "DELETE FROM task_blobs",
        "UPDATE tasks SET task_hash = 'other'",
        "DELETE FROM tasks",
        "UPDATE api_keys SET scopes = 'reward,audit,admin,review'",
        "DELETE FROM api_keys",
        "UPDATE labels SET label = 'agree'",
        "DELETE FROM evals",
        "UPDATE idempotency SET response = '{}'",
        "TRUNCATE task_blobs, tasks, api_keys, labels, evals, idempotency",
    ):
        refused(roles.app_url, statement, "permission denied")
    # An honest append still works for the role, and the task still decides as registered.
    with psycopg.connect(libpq(roles.app_url)) as conn:
        conn.execute("INSERT INTO task_blobs (task_hash, verifier, task) VALUES ('h2', 'math', '{\"answer\": \"1\"}')")
    (tmp_path / "again").mkdir()
    server = serving(tmp_path / "again", roles.app_url)
    try:
        with server.client() as c:
            r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task_id": "add",
                                                       "responses": [r"\boxed{5}", r"\boxed{6}"]}]})
            assert r.json()["groups"][0]["rewards"] == [1.0, 0.0], r.text
    finally:
        server.stop()
