"""The audit write costs the same per record however many records the store holds (SQLite).

The rollups (service/audit_rollups.py) are kept on SQLite by the record writer, once per committed
batch (service/batch_rollups.py, revision 0017; per-row triggers before it). Before issue 27's
second pass the trigger looked for a group's earlier rows through the caller's
(caller_key_id, seq) index, reading every earlier record of that caller for each new row: the
CPU per group of 8 grew from 8 ms at 400 records to 30 ms at 3,200.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from service import batch_rollups
from service.audit_rollups import RECORD_COLUMNS, rollup_statements
from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow, new_record_id


def _group(caller: str, blob: TaskBlobRow) -> list[RecordRow]:
    group_id = uuid.uuid4().hex
    return [RecordRow(id=new_record_id(), caller_key_id=caller, task_hash=blob.task_hash, task_public={},
                      verifier="math", verifier_version="1", response_hash="0" * 64, response=f"\\boxed{{{i}}}",
                      components={"correctness": {"value": float(i % 2), "hard": True}}, reward=float(i % 2),
                      verdict="correct" if i % 2 else "incorrect", evidence={}, flags=["false_step"] if i == 3 else [],
                      sandbox_backend="process", duration_ms=1.0, group_id=group_id, group_index=i,
                      group_zero_variance=False, advantage=0.0, group_mean=0.5, group_std=0.5)
            for i in range(8)]


def test_the_rollup_statements_find_earlier_rows_of_a_group_by_the_group_index(tmp_path: Path):
    store = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        new_row = "(SELECT " + ", ".join(f":{c} AS {c}" for c in RECORD_COLUMNS) + ")"
        params = dict.fromkeys(RECORD_COLUMNS, "1")
        with store.engine.connect() as conn:
            plans = [conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
                     for statement in rollup_statements("sqlite", new_row)]
            # and the writer's statements over a committed batch's rows (revision 0017)
            plans += [conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, {"after": 0}).all()
                      for statement in batch_rollups._statements()]
            triggers = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                            "AND tbl_name = 'records' AND name LIKE 'records_rollups%'").all()
        reads = [row[3] for plan in plans for row in plan if row[3].startswith(("SEARCH e", "SCAN e"))]
        assert reads, plans
        assert all("USING INDEX ix_records_group" in read for read in reads), reads
        assert triggers == []  # the writer keeps them, once per batch
    finally:
        store.engine.dispose()


@pytest.mark.slow
def test_cpu_per_group_written_does_not_grow_with_the_store(tmp_path: Path):
    store = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    blob = TaskBlobRow(task_hash="a" * 64, verifier="math", task={"answer": "1"})

    def cpu_of(groups: int) -> float:
        started = time.process_time()  # every thread of this process: the writer's too
        for _ in range(groups):
            store.append(_group("trainer", blob), [blob])
        return time.process_time() - started

    try:
        cpu_of(10)
        early = cpu_of(50)  # records 80-480
        cpu_of(400)
        late = cpu_of(50)  # records 3,680-4,080: eight times as many before them
        # Flat in fact; the old trigger cost 4-6x more here. The margin is for a loaded machine.
        assert late < 2.5 * early, (early, late)
        # The rollups still count every group (8 records, one group each).
        with store.engine.connect() as conn:
            groups = conn.exec_driver_sql("SELECT sum(n) FROM rollup_hours WHERE kind = 'groups'").scalar_one()
        assert groups == 510
    finally:
        store.close()
