"""Store reads run off the event loop: /healthz answers promptly while a large export
streams from the same server."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from service.store import AuditStore, RecordRow, TaskBlobRow, new_record_id
from tests.conftest import LiveServer

RECORDS = 10_000
HEALTHZ_BUDGET_S = 0.100


def _seed(db_url: str) -> None:
    """10,000 records written through the store's own append, as the engine writes them."""
    store = AuditStore(db_url)
    blob = TaskBlobRow(task_hash="0" * 64, verifier="math", task={"answer": "1"})
    for start in range(0, RECORDS, 1000):
        rows = [RecordRow(id=new_record_id(), request_id=None, caller_key_id="seed", task_id=None,
                          task_hash="0" * 64, task_public={"answer": "1"}, verifier="math", verifier_version="1",
                          response_hash="1" * 64, response="x" * 200, components={}, reward=1.0,
                          verdict="correct", evidence={"note": "y" * 200}, flags=[], sandbox_backend="process",
                          usage=None, duration_ms=1.0, group_id=uuid.uuid4().hex, group_index=0)
                for _ in range(start, start + 1000)]
        store.append(rows, [blob])
    store.engine.dispose()


@pytest.mark.slow
def test_healthz_answers_within_100ms_while_10000_records_export(tmp_path: Path):
    db_url = f"sqlite:///{tmp_path / 'audit.db'}"
    _seed(db_url)
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": db_url})
    try:
        exported: list[int] = []

        def export() -> None:
            with server.client() as c, c.stream("GET", "/v1/records/export") as reply:
                exported.append(sum(chunk.count(b"\n") for chunk in reply.iter_bytes()))

        thread = threading.Thread(target=export)
        latencies: list[float] = []
        with httpx.Client(base_url=server.url, timeout=10) as plain:
            plain.get("/healthz")  # connection made before timing
            baseline = _timed_healthz(plain, 20)
            thread.start()
            while thread.is_alive():
                latencies += _timed_healthz(plain, 1)
        thread.join()
        assert exported == [RECORDS]
        assert len(latencies) >= 5, "the export ended before /healthz could be timed during it"
        # Nine answers in ten within the budget; the tenth is left to the scheduler. On a
        # machine so loaded that /healthz is slow even with nothing else to do, the budget
        # is three times that idle figure, measured just before. An export that held the
        # loop would stall /healthz for seconds.
        budget = max(HEALTHZ_BUDGET_S, 3 * _p90(baseline))
        assert _p90(latencies) < budget, (budget, sorted(latencies))
    finally:
        server.stop()


def _timed_healthz(client: httpx.Client, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        assert client.get("/healthz").status_code == 200
        times.append(time.perf_counter() - started)
        time.sleep(0.02)
    return times


def _p90(values: list[float]) -> float:
    return sorted(values)[len(values) * 9 // 10]
