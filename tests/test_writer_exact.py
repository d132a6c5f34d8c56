"""The record writer stores, byte for byte, what SQLAlchemy's own insert of the same rows stores.

Held out (written and passing on main 1d0ff1d before the writer's SQLite insert changed, issue
27 item 1, sixth pass): the writer's rows are read back raw (`typeof` and `quote` of every
column, so a REAL stored as TEXT or a JSON text with other spacing differs) and compared with
the same values inserted one row at a time by SQLAlchemy Core into a fresh table of the same
schema — the reference the writer must equal whatever way it inserts. Values include what
trips encoders: non-BMP text, NUL-free control characters, tuples and int keys in JSON,
negative zero, huge integers, naive and aware times, booleans, missing optional columns
(defaults), and rows of one batch that set different columns.
"""

from __future__ import annotations

import copy
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine, insert

from service.store import AuditStore
from service.tables import Base, IdempotencyRow, RecordRow, TaskBlobRow, new_record_id


def _rows(blob: TaskBlobRow) -> list[RecordRow]:
    submission = new_record_id()
    odd = "∑ 𝔘 \u00e9\t\"quoted\" \\ back </script> \u2028"
    base = dict(caller_key_id="k1", task_hash=blob.task_hash, task_public={"answer": odd, "n": 1},
                verifier="math", verifier_version="7", response_hash="ab" * 32, sandbox_backend="process")
    return [
        RecordRow(id=new_record_id(), **base, response=f"\\boxed{{{odd}}}",
                  components={"correctness": {"value": 1.0, "hard": True}, "format": {"value": -0.0, "hard": False}},
                  reward=1.0, verdict="correct", evidence={"extracted": odd, "pair": (1, 2), 3: "int key"},
                  flags=["false_step", odd], flag_evidence={"false_step": [{"line": 2}]}, duration_ms=0.123456789,
                  group_id="g" * 32, group_index=0, advantage=0.5, group_mean=0.5, group_std=0.5,
                  group_zero_variance=False, tokens=2**40, finish_reason="stop", masked=True,
                  run_id="run-1", run_step=3, usage={"cpu_s": 1e-9, "big": 10**30}, feedback={"hint": odd},
                  submission_id=submission, submission_index=0, request_id=None,
                  created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
        RecordRow(id=new_record_id(), **base, response=None, components={}, reward=0.0, verdict="incorrect",
                  evidence={}, flags=[], duration_ms=1e300, group_id="g" * 32, group_index=1, advantage=-0.5,
                  group_mean=0.5, group_std=0.5, group_zero_variance=True, submission_id=submission,
                  submission_index=1, created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5)))),
        # a single answer: no group, fewer columns set (the defaults apply: created_at, masked)
        RecordRow(id=new_record_id(), **base, response="", components={"c": {"value": 0.25}}, reward=0.25,
                  verdict="error", evidence={"reason": "x" * 5000}, flags=[], duration_ms=0.0,
                  request_id=f"req-{new_record_id()}"),
    ]


def _raw(path: Path, table: str, order: str) -> list[tuple]:
    with sqlite3.connect(path) as db:
        columns = sorted(r[1] for r in db.execute(f"PRAGMA table_info({table})"))  # by name: the two schemas'
        # column orders differ (revisions add columns at the end)
        shown = ", ".join(f"typeof({c}), quote({c})" for c in columns if c != "created_at")
        return db.execute(f"SELECT {shown} FROM {table} ORDER BY {order}").fetchall()


def _times(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT quote(created_at) FROM records ORDER BY seq")]


def test_the_writer_stores_what_sqlalchemy_core_stores(tmp_path: Path):
    blob = TaskBlobRow(task_hash="c" * 64, verifier="math", task={"answer": "∑", "list": (1, 2)})
    other = TaskBlobRow(task_hash="d" * 64, verifier="math", task={"answer": "2"})
    store = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    batches = [_rows(blob), _rows(other)[2:], _rows(blob)[:1]]
    written: list[RecordRow] = []
    try:
        for i, rows in enumerate(batches):
            idem = IdempotencyRow(caller_key_id="k1", key=f"idem-{i}", request_hash="h" * 64,
                                  response={"groups": [], "n": i, "text": "∑"}) if i != 1 else None
            store.append(rows, [blob, other] if i == 0 else [other], idem)
            written += rows
        # the same values (as the writer left them on the row objects: chain links, digests,
        # defaults), inserted one row at a time by SQLAlchemy Core into a fresh schema
        reference = tmp_path / "reference.db"
        engine = create_engine(f"sqlite:///{reference}")
        Base.metadata.create_all(engine)
        columns = [c.key for c in RecordRow.__table__.columns if c.key != "seq"]
        with engine.begin() as conn:
            for row in written:
                values = {k: copy.deepcopy(row.__dict__[k]) for k in columns if k in row.__dict__}
                conn.execute(insert(RecordRow.__table__), values)
            for b in (blob, other):
                conn.execute(insert(TaskBlobRow.__table__), {"task_hash": b.task_hash, "verifier": b.verifier,
                                                             "task": b.task})
            for i in (0, 2):
                conn.execute(insert(IdempotencyRow.__table__),
                             {"caller_key_id": "k1", "key": f"idem-{i}", "request_hash": "h" * 64,
                              "response": {"groups": [], "n": i, "text": "∑"}})
        engine.dispose()
    finally:
        store.close()
    stored = tmp_path / "audit.db"
    assert len(_raw(stored, "records", "seq")) == len(written) == 5
    for got, want in zip(_raw(stored, "records", "seq"), _raw(reference, "records", "seq"), strict=True):
        assert [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w] == []
    # created_at: the same instant in the same text (a default applied by the writer included)
    assert _times(stored) == _times(reference)
    assert _raw(stored, "task_blobs", "task_hash") == _raw(reference, "task_blobs", "task_hash")
    with sqlite3.connect(stored) as db, sqlite3.connect(reference) as ref:
        query = "SELECT caller_key_id, key, request_hash, response FROM idempotency ORDER BY key"
        assert db.execute(query).fetchall() == ref.execute(query).fetchall()
