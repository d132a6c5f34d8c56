"""The embedded audit store: append-only, durable settings."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from service.store import AuditStore


def test_sqlite_refuses_to_change_records(store: AuditStore):
    assert_append_only(store)


def test_sqlite_runs_in_wal_with_full_sync(store: AuditStore):
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def assert_append_only(store: AuditStore) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO records (id, created_at, task_hash, task_public, verifier, verifier_version, response_hash,"
            " components, reward, verdict, evidence, flags, sandbox_backend, duration_ms)"
            " VALUES ('r1', CURRENT_TIMESTAMP, 'h', '{}', 'math', '1', 'h', '{}', 1.0, 'correct', '{}', '[]',"
            " 'process', 1.0)"))
    for statement in ("UPDATE records SET reward = 0.5", "DELETE FROM records"):
        with pytest.raises(Exception, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
