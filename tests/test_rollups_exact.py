"""Held out (issue 27 item 1, perf4; written before the SQLite rollups moved out of the row
triggers): the rollup tables are EXACTLY what the stored records give, however the writes
arrive and however a writer dies.

- Many threads append at once through the store (so the record writer commits several requests
  in one transaction): single answers, whole groups, groups whose halves come in two requests
  (often in the same transaction, sometimes in different ones), flags, errors, hours apart.
  Afterwards every rollup table equals the rollups recomputed from the records alone.
- A process appending the same way is killed with SIGKILL mid-stream; the store it leaves has
  rollups equal to its records (a committed record without its rollups, or rollups without
  their record, would differ), and a write after the restart still keeps them equal.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.audit_rollups import backfill_statements
from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parent.parent
ROLLUPS = ("rollup_hours", "rollup_quarters", "rollup_tasks", "rollup_task_hours", "rollup_split_groups")
START = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)


def _row(rng: random.Random, at: datetime, task: int, group: str | None, index: int | None, key: str,
         zero: bool | None = None) -> RecordRow:
    value = rng.choice([0.0, 0.5, 1.0])  # exact in binary: sums in any order agree
    verdict = "error" if rng.random() < 0.05 else ("correct" if value == 1.0 else "incorrect")
    return RecordRow(
        id=uuid.uuid4().hex, created_at=at, caller_key_id=key, task_id=f"math/t{task}" if task % 2 else None,
        task_hash=f"{task:064x}", task_public=None, verifier="math" if task < 6 else "code", verifier_version="1",
        response_hash="0" * 64, response=None if rng.random() < 0.1 else "z" * rng.choice([3, 150, 700, 3000]),
        components={"correctness": {"value": value, "hard": False}}, reward=value, verdict=verdict, evidence={},
        flags=[f for f in ("forbidden_tool", "exits_process") if rng.random() < 0.15], sandbox_backend="process",
        duration_ms=rng.choice([0.3, 2.0, 55.0]) * (1 + rng.random()), group_id=group, group_index=index,
        group_zero_variance=zero, tokens=rng.choice([None, 5, 80]))


def _requests(seed: int, n: int) -> list[list[RecordRow]]:
    """A client's requests: singles, whole groups, and groups sent in two halves (the second half
    right after the first, or minutes later; in the same hour or the next)."""
    rng = random.Random(seed)
    out: list[list[RecordRow]] = []
    for i in range(n):
        at = START + timedelta(minutes=7 * i + rng.randrange(5), milliseconds=rng.randrange(1000))
        task, key = rng.randrange(12), rng.choice(["k1", "k2"])
        kind = rng.randrange(3)
        if kind == 0:
            out.append([_row(rng, at, task, None, None, key)])
            continue
        # one zero-variance mark per group, as the service writes it (the hour rollups count a
        # group's mark from its first rows in the hour)
        group, size, zero = uuid.uuid4().hex, rng.choice([2, 4, 8]), rng.random() < 0.3
        rows = [_row(rng, at + timedelta(milliseconds=j), task, group, j, key, zero) for j in range(size)]
        if kind == 1:
            out.append(rows)
        else:
            later = at + timedelta(minutes=rng.choice([0, 20, 61]))
            second = [_row(rng, later + timedelta(milliseconds=j), task, group, j, key, zero)
                      for j in range(size // 2, size)]
            out += [rows[: size // 2], second]
    return out


def _blob(rows: list[RecordRow]) -> list[TaskBlobRow]:
    return [TaskBlobRow(task_hash=rows[0].task_hash, verifier=rows[0].verifier, task={"answer": "1"})]


def append_concurrently(store: AuditStore, seed: int, clients: int = 6, per_client: int = 25) -> None:
    def client(k: int) -> None:
        for rows in _requests(seed * 100 + k, per_client):
            store.append(rows, _blob(rows))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _tables(conn: sa.Connection) -> dict[str, list[tuple]]:
    return {t: sorted(tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t}")) for t in ROLLUPS}


def assert_rollups_are_the_records(url: str) -> int:
    """Compare every rollup table, read through a store as every reader reads it (on SQLite they
    may lag the records until a read begins, service/batch_rollups.py), with the rollups
    recomputed from the records (in a transaction that is rolled back, so the store is left as
    it was). Returns the number of records."""
    store = AuditStore(url)
    engine = store.engine
    try:
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                kept = _tables(conn)
                count = conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one()
                for t in ROLLUPS:
                    conn.exec_driver_sql(f"DELETE FROM {t}")
                for statement in backfill_statements(engine.dialect.name):
                    conn.exec_driver_sql(statement)
                recomputed = _tables(conn)
            finally:
                trans.rollback()
    finally:
        store.close()
    for t in ROLLUPS:
        assert kept[t] == recomputed[t], t
    assert kept["rollup_hours"], "no rollups at all"
    return count


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rollups.db'}"
    return request.getfixturevalue("database")


def test_rollups_equal_the_records_after_concurrent_writes(url: str):
    store = AuditStore(url)
    try:
        append_concurrently(store, seed=1)
        writer = store.records_writer
        assert writer.commits < writer.requests_written  # some transactions carried several requests
    finally:
        store.close()
    assert assert_rollups_are_the_records(url) > 300


CHILD = """
import sys
sys.path.insert(0, {repo!r})
from service.store import AuditStore
from tests.test_rollups_exact import append_concurrently
store = AuditStore({url!r})
print("ready", flush=True)
for seed in range(2, 1000):
    append_concurrently(store, seed, clients=4, per_client=10)
"""


@pytest.mark.slow
def test_a_writer_killed_mid_stream_leaves_rollups_equal_to_its_records(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    AuditStore(url).close()  # migrated before the child starts
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(repo=str(REPO), url=url)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        engine = sa.create_engine(url)
        deadline = time.monotonic() + 120
        with engine.connect() as conn:  # wait until it has written a few hundred records
            while conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one() < 300:
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.05)
        engine.dispose()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    before = assert_rollups_are_the_records(url)
    store = AuditStore(url)
    try:
        append_concurrently(store, seed=5000, clients=3, per_client=5)
    finally:
        store.close()
    assert assert_rollups_are_the_records(url) > before
