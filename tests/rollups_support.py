"""What tests/test_rollups_exact.py and tests/test_rollups_deferred.py share: clients' requests
of records, the rollup tables compared with their recomputation from the records, and a writer
process killed with SIGKILL while it writes."""

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

import sqlalchemy as sa

from service.audit_rollups import backfill_statements
from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow

REPO = Path(__file__).resolve().parent.parent
ROLLUPS = ("rollup_hours", "rollup_quarters", "rollup_tasks", "rollup_task_hours", "rollup_split_groups")
START = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)


def record_row(rng: random.Random, at: datetime, task: int, group: str | None, index: int | None, key: str,
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


def client_requests(seed: int, n: int) -> list[list[RecordRow]]:
    """A client's requests: singles, whole groups, and groups sent in two halves (the second half
    right after the first, or minutes later; in the same hour or the next)."""
    rng = random.Random(seed)
    out: list[list[RecordRow]] = []
    for i in range(n):
        at = START + timedelta(minutes=7 * i + rng.randrange(5), milliseconds=rng.randrange(1000))
        task, key = rng.randrange(12), rng.choice(["k1", "k2"])
        kind = rng.randrange(3)
        if kind == 0:
            out.append([record_row(rng, at, task, None, None, key)])
            continue
        # one zero-variance mark per group, as the service writes it (the hour rollups count a
        # group's mark from its first rows in the hour)
        group, size, zero = uuid.uuid4().hex, rng.choice([2, 4, 8]), rng.random() < 0.3
        rows = [record_row(rng, at + timedelta(milliseconds=j), task, group, j, key, zero) for j in range(size)]
        if kind == 1:
            out.append(rows)
        else:
            later = at + timedelta(minutes=rng.choice([0, 20, 61]))
            second = [record_row(rng, later + timedelta(milliseconds=j), task, group, j, key, zero)
                      for j in range(size // 2, size)]
            out += [rows[: size // 2], second]
    return out


def task_blobs(rows: list[RecordRow]) -> list[TaskBlobRow]:
    return [TaskBlobRow(task_hash=rows[0].task_hash, verifier=rows[0].verifier, task={"answer": "1"})]


def append_one_by_one(store: AuditStore, seed: int, n: int) -> int:
    """Append a client's requests one after another; returns the number of records written."""
    written = 0
    for rows in client_requests(seed, n):
        store.append(rows, task_blobs(rows))
        written += len(rows)
    return written


def append_concurrently(store: AuditStore, seed: int, clients: int = 6, per_client: int = 25) -> None:
    threads = [threading.Thread(target=append_one_by_one, args=(store, seed * 100 + k, per_client))
               for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rollup_tables(conn: sa.Connection) -> dict[str, list[tuple]]:
    return {t: sorted(tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t}")) for t in ROLLUPS}


def stored_and_recomputed(engine: sa.Engine) -> tuple[dict, dict, int]:
    """The rollup tables as stored and as recomputed from the records (in a transaction that is
    rolled back, so the database is left as it was), and the number of records."""
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            kept = rollup_tables(conn)
            count = conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one()
            for t in ROLLUPS:
                conn.exec_driver_sql(f"DELETE FROM {t}")
            for statement in backfill_statements(engine.dialect.name):
                conn.exec_driver_sql(statement)
            return kept, rollup_tables(conn), count
        finally:
            trans.rollback()


WRITER_CHILD = """
import sys
sys.path.insert(0, {repo!r})
from service.store import AuditStore
from tests.rollups_support import append_concurrently, append_one_by_one
store = AuditStore({url!r})
print("ready", flush=True)
for seed in range(2, 1000):
    {body}
"""


def kill_writer_after(url: str, body: str, records: int) -> None:
    """Run a writer process whose loop body (seed in scope, store open) is `body`, and SIGKILL it
    once it has committed at least `records` records."""
    AuditStore(url).close()  # migrated before the child starts
    code = WRITER_CHILD.format(repo=str(REPO), url=url, body=body)
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        engine = sa.create_engine(url)
        deadline = time.monotonic() + 120
        with engine.connect() as conn:
            while conn.exec_driver_sql("SELECT count(*) FROM records").scalar_one() < records:
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.02)
        engine.dispose()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
