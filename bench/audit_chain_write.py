"""What the hash chain costs when records are written: chained `AuditStore.append` vs today's plain write.

    python bench/audit_chain_write.py [--appends 300] [--group 8] [--threads 1,8] [--rounds 5] [--postgres URL]

Both configurations run in this one process, on the same kind of database (a fresh one
each), with the same rows: a GRPO group of `--group` records per append, built like the
engine builds them (a math task's public view, a response, components, evidence, flags),
plus its task blob. "off" is the write path before the chain: one transaction adding the
blobs and rows (the code of `AuditStore.append` before issue 21, kept here verbatim).
"on" is `AuditStore.append` now (linking each row into a lane's chain, the task digest,
a signed head every 1,024 rows of a lane or 10 s). Rounds alternate off, on, off, on... so drift on a shared
machine hits both alike; the median of the rounds is compared. SQLite runs with the
store's pragmas (WAL, synchronous=FULL); Postgres when `--postgres` names a server URL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from service.signing import Signer  # noqa: E402
from service.store import AuditStore, _add_blobs
from service.tables import RecordRow, TaskBlobRow  # noqa: E402


def rows_for(i: int, group: int) -> tuple[list[RecordRow], list[TaskBlobRow]]:
    task = {"answer": str(i), "problem": f"What is {i} + 0? Show your work." * 3}
    task_hash = uuid.uuid5(uuid.NAMESPACE_OID, str(i)).hex * 2
    rows = []
    for j in range(group):
        response = f"We add zero, so the value stays. Step {j}: {i} + 0 = {i}. \\boxed{{{i + j % 2}}}" * 4
        rows.append(RecordRow(
            id=uuid.uuid4().hex, created_at=datetime.now(UTC), caller_key_id="0123456789abcdef", task_hash=task_hash,
            task_public=task, verifier="math", verifier_version="2.0.0", response_hash=uuid.uuid4().hex * 2,
            response=response, reward=float(j % 2 == 0), verdict="correct" if j % 2 == 0 else "incorrect",
            components={"correctness": {"value": float(j % 2 == 0), "hard": True},
                        "format": {"value": 1.0, "hard": True}},
            evidence={"extracted": str(i + j % 2), "answer_normalised": str(i + j % 2), "gold": str(i)},
            flags=[], flag_evidence={}, sandbox_backend="process", usage={"wall_s": 0.01, "cpu_s": 0.01},
            duration_ms=12.5, group_id=uuid.uuid4().hex, group_index=j, submission_id=uuid.uuid4().hex,
            submission_index=j, advantage=0.5, group_mean=0.5, group_std=0.53, group_zero_variance=False,
            tokens=64, finish_reason="stop", masked=False))
    return rows, [TaskBlobRow(task_hash=task_hash, verifier="math", task=task)]


def plain_append(store: AuditStore, rows: list[RecordRow], blobs: list[TaskBlobRow]) -> None:
    """`AuditStore.append` as it was before the chain."""
    with store.db() as s, s.begin():
        _add_blobs(s, blobs)
        s.add_all(rows)


def run(store: AuditStore, write: Callable[..., None], appends: int, group: int, threads: int) -> float:
    """Records per second in steady state: a first untimed batch per thread opens connections and
    (chain on) reads each lane's head."""
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda batch: write(store, *batch), [rows_for(-1 - t, group) for t in range(threads)]))
    batches = [rows_for(i, group) for i in range(appends)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda batch: write(store, *batch), batches))
    return appends * group / (time.perf_counter() - started)


class Databases:
    def __init__(self, postgres: str | None, workdir: Path) -> None:
        self.postgres, self.workdir, self.made = postgres, workdir, []

    def fresh(self, signer: Signer | None) -> AuditStore:
        if self.postgres is None:
            return AuditStore(f"sqlite:///{self.workdir / (uuid.uuid4().hex + '.db')}", signer)
        name = f"assay_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return AuditStore(self.postgres.rsplit("/", 1)[0] + "/" + name, signer)

    def admin(self) -> str:
        assert self.postgres is not None
        return self.postgres.replace("postgresql+psycopg://", "postgresql://")

    def drop(self) -> None:
        if self.made:
            with psycopg.connect(self.admin(), autocommit=True) as conn:
                for name in self.made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--threads", default="1,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=None, help="server URL, e.g. postgresql+psycopg://postgres@host/postgres")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="assay-chain-bench-"))
    signer = Signer.load_or_create(workdir / "key.pem")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for backend in ["sqlite"] + (["postgres"] if args.postgres else []):
        dbs = Databases(args.postgres if backend == "postgres" else None, workdir)
        try:
            for threads in [int(t) for t in args.threads.split(",")]:
                rates: dict[str, list[float]] = {"off": [], "on": []}
                for _ in range(args.rounds):
                    for mode in ("off", "on"):
                        store = dbs.fresh(signer)
                        write = plain_append if mode == "off" else AuditStore.append
                        rates[mode].append(run(store, write, args.appends, args.group, threads))
                        store.close()
                off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
                print(f"{backend:8} threads={threads:<2} off {off:8.0f} records/s  on {on:8.0f} records/s  "
                      f"on/off {on / off:.3f}  (rounds off {[round(r) for r in rates['off']]}, "
                      f"on {[round(r) for r in rates['on']]})", flush=True)
        finally:
            dbs.drop()
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
