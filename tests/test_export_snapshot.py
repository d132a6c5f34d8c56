"""An export holds exactly the records as of its start (issue 27): records committed while it
runs are not in it, on Postgres also one whose seq is below the highest at the start (its
transaction began before the export and committed during it), read by either session."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from service import audit_export
from service.store import AuditStore
from service.tables import RecordRow
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import NOW, _rows, fill, stored


def _late_row() -> dict:
    """A record of its own task, in the middle of the others' time."""
    return dict(id=uuid.uuid4().hex, created_at=NOW - timedelta(hours=5), task_hash="9" * 64, task_public={},
                verifier="math", verifier_version="1", response_hash="8" * 64, response="late",
                components={}, reward=1.0, verdict="correct", evidence={}, flags=[], sandbox_backend="process",
                duration_ms=1.0, masked=False)


def _ids(chunks: list[str]) -> list[str]:
    return [json.loads(line)["id"] for line in "".join(chunks).splitlines()]


def _append_more(store: AuditStore, seed: int) -> None:
    """More records, through the store's write path."""
    for rows in _rows(random.Random(seed), 5, NOW - timedelta(minutes=10), 0.1):
        store.append(rows, [])


@pytest.mark.postgres
def test_a_postgres_export_is_the_records_as_of_its_start(database: str, monkeypatch):  # noqa: F811
    monkeypatch.setattr(audit_export, "CHUNK_ROWS", 5)
    monkeypatch.setattr(audit_export, "FIRST_SPAN", 5)
    store = AuditStore(database)
    fill(store, seed=8, n_groups=30)
    # A record draws its seq before the export starts and commits once it has started (as a
    # write does whose rows are inserted before another's but committed after them).
    with store.engine.connect() as conn:
        late_seq = conn.execute(sa.text("SELECT nextval(pg_get_serial_sequence('records', 'seq'))")).scalar_one()
    _append_more(store, 1)  # committed, seqs above the late record's
    before = [r.id for r in stored(store)]
    chunks = audit_export.export_lines(store, {})
    got = [next(chunks)]
    with store.engine.begin() as conn:
        late_id = conn.execute(sa.insert(RecordRow).values(seq=late_seq, **_late_row())
                               .returning(RecordRow.id)).scalar_one()
    _append_more(store, 2)
    got += list(chunks)
    assert late_id in [r.id for r in stored(store)]
    assert _ids(got) == before


def test_a_sqlite_export_is_the_records_as_of_its_start(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(audit_export, "PAGE", 7)
    monkeypatch.setattr(audit_export, "LINES_PER_CHUNK", 5)
    store = AuditStore(f"sqlite:///{tmp_path / 'snap.db'}")
    fill(store, seed=8, n_groups=30)
    before = [r.id for r in stored(store)]
    chunks = audit_export.export_lines(store, {})
    got = [next(chunks)]
    _append_more(store, 2)
    got += list(chunks)
    assert len(stored(store)) > len(before)
    assert _ids(got) == before


@pytest.mark.postgres
def test_an_export_finishes_while_a_ddl_waits_on_it(database: str, monkeypatch):  # noqa: F811
    """A DDL on records (here DROP INDEX) that arrives during an export waits for the export to
    end; the export's sessions, one chunk at a time, go on reading (none queues behind the DDL)."""
    monkeypatch.setattr(audit_export, "CHUNK_ROWS", 5)
    monkeypatch.setattr(audit_export, "CHUNKS_AHEAD", 1)  # one chunk at a time: any session may take the next
    store = AuditStore(database)
    fill(store, seed=9, n_groups=30)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX export_probe ON records (verdict, seq)")
    expected = [r.id for r in stored(store)]
    chunks = audit_export.export_lines(store, {})
    got = [next(chunks)]
    plain = database.replace("postgresql+psycopg://", "postgresql://")

    def drop() -> None:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("DROP INDEX export_probe")

    ddl = threading.Thread(target=drop)
    ddl.start()
    with psycopg.connect(plain, autocommit=True) as conn:
        for _ in range(100):  # until the DROP waits on the export's locks
            if conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                            "AND query LIKE 'DROP INDEX%'").fetchone()[0]:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the DROP INDEX never waited on the export")
    reader = threading.Thread(target=lambda: got.extend(chunks))
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "the export stalled behind the DDL"
    assert _ids(got) == expected
    ddl.join(timeout=60)
    assert not ddl.is_alive()
