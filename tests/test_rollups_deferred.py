"""Held out (issue 27 item 1, perf7; written and passing on ea79aee, before the SQLite rollups
were allowed to lag the records): whatever the record writer does with the rollups between
commits, every read through an audit store sees rollup tables EXACTLY equal to the rollups
recomputed from the stored records:

- one client appending one request at a time (each commit alone, so nothing is shared between
  transactions), read through the writing store at random moments, and through a second store
  on the same file (another process's view: a CLI or viewer beside the server);
- a process appending one request at a time, killed with SIGKILL between commits, then read
  through a fresh store; and a write after the restart still keeps them equal;
- (added with the change) once the writer has been idle a moment, or its store is closed, the
  stored tables themselves are exact for a reader that is not an audit store.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.audit_rollups import backfill_statements
from service.store import AuditStore
from tests.test_rollups_exact import REPO, ROLLUPS, _blob, _requests


def _tables(conn: sa.Connection) -> dict[str, list[tuple]]:
    return {t: sorted(tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t}")) for t in ROLLUPS}


def assert_store_reads_exact_rollups(store: AuditStore) -> int:
    """Read the rollups through `store` (as its readers do), then recompute them from the records
    in a transaction that is rolled back; they must be equal. Returns the number of records."""
    with store.db() as s:
        read = _tables(s.connection())
    with store.engine.connect() as conn:
        trans = conn.begin()
        try:
            kept = _tables(conn)
            count = conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one()
            for t in ROLLUPS:
                conn.exec_driver_sql(f"DELETE FROM {t}")
            for statement in backfill_statements(store.engine.dialect.name):
                conn.exec_driver_sql(statement)
            recomputed = _tables(conn)
        finally:
            trans.rollback()
    for t in ROLLUPS:
        assert read[t] == recomputed[t], t
        assert kept[t] == recomputed[t], t
    return count


def test_every_read_between_one_by_one_writes_sees_exact_rollups(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'deferred.db'}"
    writer, other = AuditStore(url), None
    try:
        other = AuditStore(url)  # a second store on the same file: another process's reads
        rng = random.Random(7)
        written = 0
        for seed in range(6):
            for rows in _requests(seed, rng.randrange(3, 40)):
                writer.append(rows, _blob(rows))
                written += len(rows)
                if rng.random() < 0.08:
                    assert assert_store_reads_exact_rollups(rng.choice([writer, other])) == written
            assert assert_store_reads_exact_rollups(other) == written
            assert assert_store_reads_exact_rollups(writer) == written
        assert writer.records_writer.commits == writer.records_writer.requests_written  # one by one
    finally:
        writer.close()
        if other is not None:
            other.close()
    store = AuditStore(url)
    try:
        assert assert_store_reads_exact_rollups(store) == written
    finally:
        store.close()


def _raw_reader_sees_exact_rollups(url: str) -> None:
    """A reader of the file that is not an audit store (sqlite3, a backup) reads the tables as stored."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                kept = _tables(conn)
                for t in ROLLUPS:
                    conn.exec_driver_sql(f"DELETE FROM {t}")
                for statement in backfill_statements("sqlite"):
                    conn.exec_driver_sql(statement)
                assert _tables(conn) == kept
            finally:
                trans.rollback()
    finally:
        engine.dispose()


def test_an_idle_or_closed_store_leaves_the_stored_rollups_exact(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'idle.db'}"
    store = AuditStore(url)
    try:
        for rows in _requests(11, 30):
            store.append(rows, _blob(rows))
        time.sleep(1.0)  # the writer has nothing to write
        _raw_reader_sees_exact_rollups(url)
        for rows in _requests(12, 30):
            store.append(rows, _blob(rows))
    finally:
        store.close()
    _raw_reader_sees_exact_rollups(url)


CHILD = """
import sys
sys.path.insert(0, {repo!r})
from service.store import AuditStore
from tests.test_rollups_exact import _blob, _requests
store = AuditStore({url!r})
print("ready", flush=True)
for seed in range(2, 1000):
    for rows in _requests(seed, 20):
        store.append(rows, _blob(rows))
"""


@pytest.mark.slow
def test_a_one_by_one_writer_killed_between_commits_leaves_exact_rollups(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    AuditStore(url).close()  # migrated before the child starts
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(repo=str(REPO), url=url)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        engine = sa.create_engine(url)
        deadline = time.monotonic() + 120
        target = random.Random().randrange(150, 400)
        with engine.connect() as conn:
            while conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one() < target:
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.02)
        engine.dispose()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    store = AuditStore(url)
    try:
        before = assert_store_reads_exact_rollups(store)
        for rows in _requests(9000, 12):
            store.append(rows, _blob(rows))
        assert assert_store_reads_exact_rollups(store) > before
    finally:
        store.close()
    store = AuditStore(url)
    try:
        assert_store_reads_exact_rollups(store)
    finally:
        store.close()
