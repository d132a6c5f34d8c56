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

from pathlib import Path

import pytest

from service.store import AuditStore
from tests.rollups_support import ROLLUPS, append_concurrently, kill_writer_after, stored_and_recomputed
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)


def assert_rollups_are_the_records(url: str) -> int:
    """Compare every rollup table, read through a store as every reader reads it (on SQLite they
    may lag the records until a read begins, service/batch_rollups.py), with the rollups
    recomputed from the records. Returns the number of records."""
    store = AuditStore(url)
    try:
        kept, recomputed, count = stored_and_recomputed(store.engine)
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


@pytest.mark.slow
def test_a_writer_killed_mid_stream_leaves_rollups_equal_to_its_records(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    kill_writer_after(url, "append_concurrently(store, seed, clients=4, per_client=10)", records=300)
    before = assert_rollups_are_the_records(url)
    store = AuditStore(url)
    try:
        append_concurrently(store, seed=5000, clients=3, per_client=5)
    finally:
        store.close()
    assert assert_rollups_are_the_records(url) > before
