"""CPU to write groups of 8 audit records as the store grows (SQLite, durable commits).

    python bench/audit_write_cost.py [--rounds 4] [--groups 200] [--size 8] [--no-rollups]

Each round appends `--groups` groups of 8 records through `AuditStore.append` (the record
writer: chain links, Core inserts, the rollup triggers, one commit per call) and prints the
process's CPU per group: flat when the write costs the same however many records the store
holds. `--no-rollups` leaves the rollups out, to read their share: it drops the rollup
triggers (stores before revision 0017) and turns off the record writer's own rollup statements
(service/batch_rollups.py, revision 0017 on). `--size 1`: single answers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service import audit_rollups  # noqa: E402
from service.store import AuditStore  # noqa: E402
from service.tables import RecordRow, TaskBlobRow, new_record_id  # noqa: E402


def _group(blob: TaskBlobRow, size: int = 8) -> list[RecordRow]:
    group_id = new_record_id()
    return [RecordRow(id=new_record_id(), caller_key_id="bench", task_hash=blob.task_hash, task_public={},
                      verifier="math", verifier_version="bench", response_hash="0" * 64, response=f"\\boxed{{{i}}}",
                      components={"format": {"value": 1.0, "hard": True}}, reward=1.0, verdict="correct",
                      evidence={"extracted": str(i)}, flags=[], sandbox_backend="process", duration_ms=1.0,
                      group_id=group_id, group_index=i, group_zero_variance=False) for i in range(size)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--size", type=int, default=8, help="records per request")
    parser.add_argument("--no-rollups", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = AuditStore(f"sqlite:///{tmp}/audit.db")
        if args.no_rollups:
            with store.engine.begin() as conn:
                # (before this pass the store had one trigger, `records_rollups`)
                for name in getattr(audit_rollups, "SQLITE_TRIGGERS", ("records_rollups",)):
                    conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
            with contextlib.suppress(ImportError):
                from service import batch_rollups
                if hasattr(batch_rollups, "defer_new_rows"):  # rollups that lag the records (perf7)
                    batch_rollups.defer_new_rows = lambda conn, inserted: 0
                else:
                    batch_rollups.add_new_rows = lambda conn, inserted: None
        blobs = [TaskBlobRow(task_hash=f"{g:064x}", verifier="math", task={"answer": str(g)}) for g in range(20)]
        for round_ in range(args.rounds):
            cpu, wall = time.process_time(), time.perf_counter()
            for g in range(args.groups):
                blob = blobs[g % len(blobs)]
                store.append(_group(blob, args.size), [blob])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            held = round_ * args.groups * args.size
            print(f"records {held:,}-{held + args.groups * args.size:,}: CPU {1000 * cpu / args.groups:.2f} ms, wall "
                  f"{1000 * wall / args.groups:.2f} ms per request of {args.size}; load {os.getloadavg()[0]:.1f}")
        store.close()


if __name__ == "__main__":
    main()
