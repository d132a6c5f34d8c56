"""The audit store on a real Postgres server: records written, read back, kept across restarts."""

from __future__ import annotations

import os
import subprocess
import uuid

import psycopg
import pytest

from service.store import AuditStore
from tests.conftest import REPO, LiveServer
from tests.test_audit_store import assert_append_only

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def postgres_url() -> str:
    url = os.environ.get("ASSAY_TEST_POSTGRES_URL")
    if not url:
        url = subprocess.run([str(REPO / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True,
                             check=True).stdout.strip()
    return url


@pytest.fixture
def database(postgres_url: str) -> str:
    name = f"assay_audit_{uuid.uuid4().hex[:10]}"
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_records_land_in_postgres_and_survive_restart(tmp_path, database: str):
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": database})
    try:
        with server.client() as c:
            r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "2"},
                                                       "responses": [r"\boxed{2}", r"\boxed{3}"]}]})
            assert r.status_code == 200, r.text
            ids = [res["record_id"] for res in r.json()["groups"][0]["results"]]
        with psycopg.connect(database.replace("postgresql+psycopg://", "postgresql://")) as conn:
            rows = conn.execute("SELECT id, verdict FROM records ORDER BY seq").fetchall()
        assert [row[0] for row in rows] == ids and [row[1] for row in rows] == ["correct", "incorrect"]
        server.restart()
        with server.client() as c:
            assert c.get(f"/v1/records/{ids[0]}").json()["verdict"] == "correct"
            assert c.post(f"/v1/records/{ids[1]}/replay").json()["same_verdict"] is True
    finally:
        server.stop()


def test_postgres_refuses_to_change_records(database: str):
    assert_append_only(AuditStore(database))

