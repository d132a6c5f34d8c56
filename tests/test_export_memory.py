"""The viewer's export streams: its peak memory does not grow with the record count, on
SQLite and on Postgres, and the zip holds every record (tracemalloc of the export alone;
`bench/export_memory.py` measures peak RSS for 20,000 records)."""

from __future__ import annotations

import io
import json
import tempfile
import tracemalloc
import uuid
import zipfile
from pathlib import Path

import pytest

from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow, new_record_id
from service.ui import bundle
from service.ui.queries import RecordFilter

RESPONSE_KB = 20


def _seed(store: AuditStore, count: int) -> None:
    blob = TaskBlobRow(task_hash="0" * 64, verifier="math", task={"answer": "1"})
    rows = [RecordRow(id=new_record_id(), request_id=None, caller_key_id="seed", task_id=None, task_hash="0" * 64,
                      task_public={"answer": "1"}, verifier="math", verifier_version="1", response_hash="1" * 64,
                      response=uuid.uuid4().hex * (RESPONSE_KB * 32), components={}, reward=i / count,
                      verdict="correct", evidence={}, flags=[], sandbox_backend="process", usage=None,
                      duration_ms=1.0, group_id=None, group_index=None) for i in range(count)]
    store.append(rows, [blob])


def _export_peak(store: AuditStore, sort: str, limit: int) -> tuple[int, bytes]:
    """Peak Python memory while the export is made; what it hands over goes to disk."""
    chunks, _ = bundle.stream(store, RecordFilter(sort=sort), limit)
    with tempfile.TemporaryFile() as out:
        tracemalloc.start()
        try:
            for chunk in chunks:
                out.write(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        out.seek(0)
        return peak, out.read()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        made = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
        yield made
        made.engine.dispose()
        return
    from tests.test_edge_guard import _postgres_database

    databases = _postgres_database()
    made = AuditStore(next(databases))
    yield made
    made.engine.dispose()
    next(databases, None)


@pytest.mark.parametrize("sort", ["newest", "reward_desc"])
def test_export_memory_does_not_grow_with_the_record_count(store: AuditStore, sort: str):
    _seed(store, 1600)
    small, _ = _export_peak(store, sort, 200)
    large, data = _export_peak(store, sort, 1600)
    # Eight times the records (32 MB of responses): the peak stays within a page's worth.
    assert large < small + 8 * 2**20, (small, large)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        lines = z.read(next(n for n in names if n.endswith("records.jsonl"))).decode().splitlines()
        script = z.read(next(n for n in names if n.endswith("data.js"))).decode()
        assert any(n.endswith("index.html") for n in names)
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == 1600
    meta = json.loads(script.removeprefix("window.ASSAY_BUNDLE = ").rstrip().rstrip(";"))["meta"]
    assert meta["count"] == 1600 and meta["truncated"] is False


def test_export_says_when_the_limit_cut_the_set(store: AuditStore):
    _seed(store, 30)
    _, data = _export_peak(store, "newest", 20)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        script = z.read(next(n for n in z.namelist() if n.endswith("data.js"))).decode()
    bundle_data = json.loads(script.removeprefix("window.ASSAY_BUNDLE = ").rstrip().rstrip(";"))
    assert bundle_data["meta"] == {**bundle_data["meta"], "count": 20, "truncated": True}
    assert len(bundle_data["records"]) == 20
