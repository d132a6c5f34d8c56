"""A fresh service pays its per-connection and per-template costs at start, before it answers
(issue 27 item 3: a run page's and the review page's first reads in a fresh process were the
slowest): on Postgres its pool's connections are open and have planned a read of the records
table by the time the first request comes, so the first reads open no connection; every
template is compiled. The pages still answer right afterwards (hostile first: an unknown
record is a 404 page, then the real one)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.auth import create_key
from service.config import Settings
from service.store import AuditStore
from service.ui import render
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import fill, stored


def _settings(tmp_path: Path, url: str) -> Settings:
    return Settings(database_url=url, warm_up="none", signing_key_path=tmp_path / "k.pem",
                    fingerprint_key_file=tmp_path / "f.key")


def _backends(url: str) -> int:
    """Client connections to this test's own database other than the asking one (an autovacuum
    worker the fill woke also names the database: CI once counted one, so only clients count)."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchone()[0]


def _sign_in(client: TestClient, key: str) -> None:
    token = re.search(r'name="csrf_token" value="([^"]*)"', client.get("/ui/").text).group(1)
    assert client.post("/ui/sign-in", data={"api_key": key, "csrf_token": token},
                       follow_redirects=False).status_code == 303


@pytest.mark.postgres
def test_pool_is_open_and_planned_before_the_first_request(tmp_path: Path, database: str):  # noqa: F811
    store = AuditStore(database)
    fill(store, seed=5, n_groups=40)
    record = stored(store)[0]
    key = create_key(store, ["audit", "review"])
    store.close()
    app = create_app(_settings(tmp_path, database))
    with TestClient(app) as client:
        pool = app.state.store.engine.pool
        assert pool.size() >= 2
        assert pool.checkedin() == pool.size(), "the pool was not opened at start"
        opened = _backends(database)
        assert opened >= pool.size()
        _sign_in(client, key)
        assert client.get("/ui/records/no-such-record").status_code == 404
        page = client.get(f"/ui/records/{record.id}")
        assert page.status_code == 200 and record.id in page.text
        assert client.get("/ui/review").status_code == 200
        assert client.get("/ui/records?sort=reward_desc&verdict=correct").status_code == 200
        # Sequential reads took connections the start opened: none was opened for them.
        assert _backends(database) == opened
        assert pool.checkedin() == pool.size()


def test_every_template_is_compiled_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    compiled: list[str] = []
    load = render._env.loader.load

    def counting(environment, name, globals=None):  # noqa: A002  (Jinja's parameter name)
        compiled.append(name)
        return load(environment, name, globals)

    render._env.cache.clear()
    monkeypatch.setattr(render._env.loader, "load", counting)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = AuditStore(url)
    key = create_key(store, ["audit", "review"])
    store.close()
    with TestClient(create_app(_settings(tmp_path, url))) as client:
        at_start = set(compiled)
        assert at_start == set(render._env.list_templates())
        _sign_in(client, key)
        for path in ("/ui/", "/ui/records", "/ui/review", "/ui/runs", "/ui/evals", "/ui/verifiers"):
            assert client.get(path).status_code == 200, path
        assert len(compiled) == len(at_start), "a page compiled a template after the start"
