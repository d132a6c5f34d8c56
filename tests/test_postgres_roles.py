"""Append-only in fact on Postgres: the service's role reads and appends records, and nothing more.

The schema owner runs `assay db upgrade --service-role ROLE`; the service connects as ROLE.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import REPO, LiveServer
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


def assay(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": url}, timeout=120)


def refused(url: str, statement: str, match: str) -> None:
    with pytest.raises(psycopg.Error, match=match), psycopg.connect(libpq(url)) as conn:
        conn.execute(statement)


def test_service_role_appends_and_reads_but_cannot_change_records(tmp_path, roles: Roles):
    # The restricted role cannot create the schema itself: the owner migrates.
    upgraded = assay(roles.app_url, "db", "upgrade", "--url", roles.owner_url, "--service-role", roles.app)
    assert upgraded.returncode == 0, upgraded.stderr

    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": roles.app_url})
    try:
        with server.client() as c:
            r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "2"},
                                                       "responses": [r"\boxed{2}", r"\boxed{3}"]}]})
            assert r.status_code == 200, r.text
            first = r.json()["groups"][0]["results"][0]["record_id"]
            assert c.get(f"/v1/records/{first}").json()["verdict"] == "correct"
    finally:
        server.stop()

    with psycopg.connect(libpq(roles.app_url)) as conn:
        conn.execute(RECORD.format(id="byapp"))
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 3
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
    started = assay(roles.app_url, "serve", "--port", "1")
    assert started.returncode != 0
    assert "assay db upgrade" in started.stderr, started.stderr


@pytest.mark.parametrize("who", ["owner", "superuser", "missing"])
def test_service_role_must_be_a_separate_plain_role(roles: Roles, who: str):
    role = {"owner": roles.owner, "superuser": "postgres", "missing": "nobody_" + uuid.uuid4().hex[:6]}[who]
    done = assay(roles.owner_url, "db", "upgrade", "--service-role", role)
    assert done.returncode == 2 and "error:" in done.stderr and role in done.stderr
