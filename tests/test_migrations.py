"""Alembic migrations: one head, models equal to the revisions, release databases upgraded losslessly.

The release fixture (tests/fixtures/release_0_1_0_schema.json) is the DDL that release
0.1.0 (before migrations) ran at start-up, captured from its store for SQLite and Postgres.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from service import migrations
from service.audit_partitions import is_derived, schema_differences
from service.store import AuditStore
from service.tables import Base
from service.testing.app import AppServer, app_settings
from service.testing.cli import run_cli
from tests.conftest import REPO
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_store import assert_append_only

RELEASE_DDL = json.loads((REPO / "tests" / "fixtures" / "release_0_1_0_schema.json").read_text())
SECRET = "release-secret"


def cli(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": url}, check=check, timeout=120)


def make_release_database(url: str, records: int = 25) -> str:
    """A database as release 0.1.0 left it, with records, a key, a task, an idempotent response."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in RELEASE_DDL[engine.dialect.name]:
            conn.exec_driver_sql(statement)
    with engine.begin() as conn:
        tables = sa.MetaData()
        tables.reflect(conn)
        now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        key_id = "0123456789abcdef"
        conn.execute(tables.tables["api_keys"].insert(), [{
            "key_id": key_id, "secret_hash": hashlib.sha256(SECRET.encode()).hexdigest(),
            "scopes": "admin,audit,reward", "name": "release", "created_at": now, "revoked": False}])
        conn.execute(tables.tables["task_blobs"].insert(), [{"task_hash": "a" * 64, "verifier": "math",
                                                             "task": {"answer": "2"}}])
        conn.execute(tables.tables["tasks"].insert(), [{"task_id": "two", "verifier": "math", "task_hash": "a" * 64,
                                                        "created_at": now}])
        conn.execute(tables.tables["idempotency"].insert(), [{
            "caller_key_id": key_id, "key": "idem-1", "request_hash": "b" * 64, "response": {"groups": []},
            "created_at": now}])
        conn.execute(tables.tables["records"].insert(), [{
            "id": f"{i:032x}", "created_at": now, "request_id": f"req-{i}", "caller_key_id": key_id,
            "task_id": "two", "task_hash": "a" * 64, "task_public": {"answer": "2"}, "verifier": "math",
            "verifier_version": "1", "response_hash": f"{i:064x}", "response": f"\\boxed{{{i}}}",
            "components": {"correctness": {"value": float(i == 2), "hard": True}}, "reward": float(i == 2),
            "verdict": "correct" if i == 2 else "incorrect", "evidence": {"parsed": str(i)}, "flags": ["x"] * (i % 2),
            "sandbox_backend": "process", "usage": None, "duration_ms": 1.5 + i, "group_id": "g", "group_index": i,
        } for i in range(records)])
    engine.dispose()
    return f"ak_{key_id}_{SECRET}"


def dump(url: str) -> dict[str, list[tuple]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        tables = sa.MetaData()
        tables.reflect(conn)
        found = {name: [dict(row._mapping)
                        for row in conn.execute(sa.select(table).order_by(*table.primary_key.columns))]
                 for name, table in tables.tables.items() if name != "alembic_version"}
    engine.dispose()
    return found


def test_one_head_and_models_match_the_revisions(tmp_path: Path):
    store = AuditStore(f"sqlite:///{tmp_path / 'fresh.db'}")
    with store.engine.connect() as conn:
        assert migrations.current_revision(conn) == migrations.head_revision()
        assert schema_differences(conn, Base.metadata) == []


@pytest.fixture(params=["sqlite", "postgresql"])
def release_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'release.db'}"
    return request.getfixturevalue("database")


@pytest.mark.slow
def test_release_database_is_refused_then_upgraded_without_loss(tmp_path: Path, release_url: str):
    key = make_release_database(release_url)
    before = dump(release_url)
    assert len(before["records"]) == 25

    refused = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", "1"], cwd=REPO,
                             capture_output=True, text=True, timeout=120,
                             env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": release_url})
    assert refused.returncode == 2 and "assay db upgrade" in refused.stderr, refused.stderr
    assert dump(release_url) == before  # refusing changed nothing

    out = cli(release_url, "db", "upgrade").stdout
    assert f"revision {migrations.head_revision()} (was none)" in out
    assert_kept(before, dump(release_url))
    again = run_cli(["db", "upgrade"], {"ASSAY_DATABASE_URL": release_url})  # in this process: the command's code
    assert again.returncode == 0, again.stderr  # again: nothing to do

    engine = sa.create_engine(release_url)
    with engine.connect() as conn:
        assert schema_differences(conn, Base.metadata) == []
    engine.dispose()
    assert_append_only_still(release_url)

    with AppServer(app_settings(tmp_path, database_url=release_url)) as server, server.client(key) as c:
        old = c.get(f"/v1/records/{2:032x}").json()
        assert old["verdict"] == "correct" and old["response"] == "\\boxed{2}"
        r = c.post("/v1/verify", json={"verifier": "math", "task_id": "two", "response": "\\boxed{2}"})
        assert r.status_code == 200 and r.json()["verdict"] == "correct", r.text
        assert len(c.get("/v1/records", params={"limit": 100}).json()["records"]) == 26


def assert_kept(before: dict[str, list[dict]], after: dict[str, list[dict]]) -> None:
    """Every row of `before` is in `after` unchanged; what the upgrade added (tables,
    columns) holds nothing but a column's default (None, or false for a flag)."""
    for name, rows in after.items():
        if is_derived(name):  # rollups and keys (equal to a recomputation: test_audit_scale.py), partitions
            continue
        kept = before.get(name, [])
        assert len(rows) == len(kept), name
        for old, new in zip(kept, rows, strict=True):
            assert {k: new[k] for k in old} == old, name
            assert all(new[k] in (None, False) for k in new.keys() - old.keys()), name


def assert_append_only_still(url: str) -> None:
    engine = sa.create_engine(url)
    for statement in ("UPDATE records SET reward = 0.5", "DELETE FROM records"):
        with pytest.raises(sa.exc.DatabaseError, match="append-only"), engine.begin() as conn:
            conn.exec_driver_sql(statement)
    engine.dispose()


def test_database_behind_head_is_refused_until_upgraded(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        from alembic import command

        command.upgrade(migrations.alembic_config(conn), "0001")
        conn.commit()
    with pytest.raises(migrations.SchemaOutOfDate, match="revision 0001.*assay db upgrade"):
        AuditStore(url)
    assert "(was 0001)" in cli(url, "db", "upgrade").stdout
    assert_append_only(AuditStore(url))


def test_unknown_newer_revision_is_refused(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    AuditStore(url).engine.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(migrations.SchemaOutOfDate, match="newer than this Assay"):
        AuditStore(url)
