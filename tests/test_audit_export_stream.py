"""The Postgres export fetches batches ahead of the one being sent (service/audit_export.py):
every record once, in write order, equal to the API's record, across many small batches; a
reader that stops after the first chunk (a client that hangs up) leaves no connection
checked out and no fetch thread behind; a record whose line the database cannot write (a
non-finite reward) still comes out through the Python path."""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import UTC, datetime

import pytest

from service import audit_export
from service.audit_export import export_lines
from service.pipeline.results import record_out
from service.store import AuditStore
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import _rows, stored

pytestmark = pytest.mark.postgres


def _wait_until(condition, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_prefetched_export_is_every_record_in_order_and_a_hang_up_releases_everything(
        database: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    monkeypatch.setattr(audit_export, "STREAM_ROWS", 7)
    store = AuditStore(database)
    now = datetime.now(UTC).replace(microsecond=0)
    requests = _rows(random.Random(5), 40, now.replace(hour=0, minute=0, second=0), 20)
    requests[3][0].reward = float("nan")  # not JSON: this line is written by Python
    for rows in requests:
        store.append(rows, [])
    rows = stored(store)
    lines = "".join(export_lines(store, {})).splitlines()
    assert len(lines) == len(rows) > 7 * 5
    expected = [json.loads(record_out(r).model_dump_json()) for r in rows]
    assert [json.loads(line) for line in lines] == expected
    math_only = [json.loads(line) for line in "".join(export_lines(store, {"verifier": "math"})).splitlines()]
    assert math_only == [e for e in expected if e["verifier"] == "math"]

    threads_before = {t.ident for t in threading.enumerate()}
    chunks = export_lines(store, {})
    first = next(chunks)
    assert first.count("\n") == 7
    chunks.close()  # the client hung up after one chunk
    assert _wait_until(lambda: store.engine.pool.checkedout() == 0)
    assert _wait_until(lambda: not [t for t in threading.enumerate()
                                    if t.name == "export-fetch" and t.ident not in threads_before])
    # And the store still answers (nothing left locked or in a broken transaction).
    assert len("".join(export_lines(store, {"verifier": "code"})).splitlines()) == sum(
        r.verifier == "code" for r in rows)
