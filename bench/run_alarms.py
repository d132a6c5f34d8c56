"""Training runs and their alarms: synthetic runs replayed through a real service, and the
per-run series at scale on Postgres.

    python bench/run_alarms.py [--steps 14] [--rows 1000000] [--run-rows 200000] [--repeat 5]

Part 1 (a real `assay serve`, SQLite): an honest run and a hacking run (tests/run_support.py:
from step `change` on, a growing share of training responses is a bare boxed answer, flagged
`answer_only`, while held-out pass@1 falls) are posted step by step through /v1/groups and
/v1/evals with `run: {id, step}`. Printed: which alarms each run raised, at which step, and
how many steps after the change. Baseline in the same run: the same step's /v1/groups request
without the run tag (the monitor's cost on the request path).

Part 2 (Postgres, ASSAY_TEST_POSTGRES_URL or scripts/postgres.sh): `rows` records bulk-inserted
(INSERT ... SELECT FROM generate_series), `run_rows` of them in one run of 200 steps, the rest in
50 small runs and in no run. Timed: the run's whole series (service.runs.steps + held_out),
GET /v1/runs's list, and — as the baseline — the same per-step mean reward computed by a Python
scan of the run's records (store.iter_all, what the aggregation replaces). The query plans of
the series' main query and of the list are printed (they should use ix_records_run_step).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, select, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.runs import StepCache, held_out, list_runs, steps  # noqa: E402
from service.store import AuditStore
from service.tables import RecordRow  # noqa: E402
from service.testing.live import LiveServer  # noqa: E402
from service.testing.runs import SyntheticRun, replay  # noqa: E402

FILL = """
INSERT INTO records (id, created_at, caller_key_id, task_id, task_hash, task_public, verifier, verifier_version,
    response_hash, response, components, reward, verdict, evidence, flags, sandbox_backend, duration_ms, group_id,
    group_index, group_zero_variance, masked, tokens, finish_reason, run_id, run_step)
SELECT md5('r' || g), now() - ((:rows - g) * interval '1 second'), 'key', 'task-' || (g / 64),
    md5('t' || (g / 64)) || md5('u' || (g / 64)), '{}'::json, 'math', '1', md5('h' || g) || md5('i' || g),
    'Working: ' || repeat('step ', g % 97) || ' so \\boxed{' || (g % 13) || '}', '{}'::json,
    CASE WHEN g % 10 < 5 THEN 1.0 ELSE 0.0 END,
    CASE WHEN g % 10 < 5 THEN 'correct' WHEN g % 10 < 9 THEN 'incorrect' WHEN g % 50 = 9 THEN 'timeout'
         ELSE 'error' END,
    json_build_object('answer_normalised', (g % 13)::text),
    CASE WHEN g % 50 = 7 THEN '["answer_only"]'::json ELSE '[]'::json END,
    'process', 5.0, md5('g' || (g / 8)), g % 8, (g / 8) % 9 = 0, false, 20 + g % 300,
    CASE WHEN g % 40 = 0 THEN 'length' ELSE 'stop' END,
    CASE WHEN g <= :run_rows THEN 'big-run' WHEN g % 3 = 0 THEN 'small-' || (g % 50) ELSE NULL END,
    CASE WHEN g <= :run_rows THEN g * 200 / (:run_rows + 1) WHEN g % 3 = 0 THEN (g / 1000) % 100 ELSE NULL END
FROM generate_series(1, :rows) AS g
"""
# More responses at the big run's last step (199), as a trainer logs them.
ADD = FILL.replace("FROM generate_series(1, :rows) AS g", "FROM generate_series(:first, :last) AS g").replace(
    "CASE WHEN g <= :run_rows THEN 'big-run' WHEN g % 3 = 0 THEN 'small-' || (g % 50) ELSE NULL END", "'big-run'"
).replace("CASE WHEN g <= :run_rows THEN g * 200 / (:run_rows + 1) WHEN g % 3 = 0 THEN (g / 1000) % 100 ELSE NULL END",
          "199").replace(":rows - g", "0")


def part1(steps_n: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp), env={"ASSAY_ALARM_CHECK_INTERVAL_S": "0"})
        try:
            with server.client() as c:
                print(f"{'run':24} {'rule':24} {'subject':12} {'step':>4} {'after change':>12}")
                for kind, seed in (("honest", 11), ("hacking", 12)):
                    run = SyntheticRun(f"{kind}-{uuid.uuid4().hex[:6]}", kind, steps=steps_n, seed=seed)
                    replay(run, c)
                    out = c.get(f"/v1/runs/{run.run_id}").json()
                    if not out["alarms"]:
                        print(f"{run.run_id:24} {'(none)':24}")
                    for a in out["alarms"]:
                        print(f"{run.run_id:24} {a['rule']:24} {a['subject']:12} {a['step']:4d} "
                              f"{a['step'] - run.change:12d}")
                # Tagged against untagged: the same groups, alternately, 2 x 15 requests.
                body = {"groups": [{"verifier": "math", "task": {"answer": "4"},
                                    "responses": ["We add: 2 + 2 = 4, \\boxed{4}"] * 8}] * 6}
                tagged, plain = [], []
                for i in range(30):
                    payload = {**body, "run": {"id": "overhead", "step": i}} if i % 2 else body
                    started = time.perf_counter()
                    c.post("/v1/groups", json=payload).raise_for_status()
                    (tagged if i % 2 else plain).append(time.perf_counter() - started)
                t, p = statistics.median(tagged) * 1000, statistics.median(plain) * 1000
                print(f"/v1/groups, 48 responses: tagged {t:.1f} ms, untagged {p:.1f} ms median (ratio {t / p:.2f})")
        finally:
            server.stop()


def run_rows_scanned(store: AuditStore, run_id: str) -> Iterator[RecordRow]:
    """The run's records in keyset pages of 500 (how a Python scan reads them)."""
    after = 0
    while True:
        with store.db() as s:
            page = list(s.scalars(select(RecordRow).where(RecordRow.run_id == run_id, RecordRow.seq > after)
                                  .order_by(RecordRow.seq).limit(500)))
        if not page:
            return
        yield from page
        after = page[-1].seq


def part2(rows: int, run_rows: int, repeat: int, keep: str | None) -> None:
    admin_url = os.environ.get("ASSAY_TEST_POSTGRES_URL") or subprocess.run(
        ["scripts/postgres.sh", "start"], capture_output=True, text=True, check=True).stdout.strip()
    name = keep or f"assay_runs_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar()
        if not exists:
            conn.execute(text(f"CREATE DATABASE {name}"))
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    try:
        store = AuditStore(url)
        started = time.perf_counter()
        if exists:
            print(f"reusing database {name}")
            return measure(store, rows, run_rows, repeat)
        indexes = list(RecordRow.__table__.indexes)
        with store.engine.begin() as conn:
            for index in indexes:
                index.drop(conn)
            conn.execute(text(FILL), {"rows": rows, "run_rows": run_rows})
            for index in indexes:
                index.create(conn)
            conn.execute(text("ANALYZE records"))
        print(f"inserted {rows:,} records ({run_rows:,} in run 'big-run', 200 steps) and built the indexes in "
              f"{time.perf_counter() - started:.1f} s (database {name})")
        measure(store, rows, run_rows, repeat)
    finally:
        if not keep:
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def measure(store: AuditStore, rows: int, run_rows: int, repeat: int) -> None:

    def timed(fn, *args):  # type: ignore[no-untyped-def]
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = fn(*args)
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000, result

    series_ms, series = timed(steps, store, "big-run", None)  # cold: no cache, every step computed
    cache = StepCache()
    steps(store, "big-run", cache)
    added = []
    for k in range(repeat):  # warm: the trainer logs 1,000 more responses at its step, then the page is read
        with store.engine.begin() as conn:
            conn.execute(text(ADD), {"first": rows + 1 + k * 1000, "last": rows + (k + 1) * 1000})
        t0 = time.perf_counter()
        warm = steps(store, "big-run", cache)
        added.append(time.perf_counter() - t0)
    warm_ms = statistics.median(added) * 1000
    assert warm[-1].n == series[-1].n + repeat * 1000
    held_ms, _ = timed(held_out, store, "big-run")
    list_ms, listed = timed(list_runs, store)
    small_ms, _ = timed(steps, store, "small-7")

    def scan(run_id: str) -> dict[int, float]:
        sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
        for row in run_rows_scanned(store, run_id):
            if row.verdict == "error" or row.masked or row.eval_id is not None:
                continue
            sums[row.run_step][0] += row.reward
            sums[row.run_step][1] += 1
        return {k: total / n for k, (total, n) in sums.items()}

    scan_ms, means = timed(scan, "big-run")
    assert all(abs(means[s.step] - s.reward_mean) < 1e-9 for s in series if s.reward_mean is not None)
    print(f"series of 'big-run' ({len(series)} steps, {run_rows:,} records), cold: {series_ms:.0f} ms median "
          f"(every figure of every step); held-out: {held_ms:.0f} ms")
    print(f"series of 'big-run' after 1,000 more records at its last step (cached steps): {warm_ms:.0f} ms median")
    print(f"baseline: mean reward per step by a Python scan of the same records: {scan_ms:.0f} ms "
          f"(aggregation {scan_ms / series_ms:.1f}x faster, and it computes every figure)")
    print(f"series of a small run (~{rows // 3 // 50:,} records): {small_ms:.0f} ms; "
          f"GET /v1/runs list ({len(listed)} runs): {list_ms:.0f} ms")
    with store.engine.connect() as conn:
        plan = conn.execute(text("EXPLAIN SELECT run_step, count(*), sum(reward) FROM records "
                                 "WHERE run_id = 'big-run' AND eval_id IS NULL GROUP BY run_step")).scalars()
        print("plan (series):\n  " + "\n  ".join(plan))
        plan = conn.execute(text("EXPLAIN SELECT run_id, count(*), min(run_step), max(run_step) FROM records "
                                 "WHERE run_id IS NOT NULL GROUP BY run_id")).scalars()
        print("plan (list):\n  " + "\n  ".join(plan))
    store.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--run-rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--keep", default=None, metavar="NAME",
                        help="use (or fill and keep) the Postgres database NAME instead of a throwaway one")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores shared)")
    if not args.skip_replay:
        part1(args.steps)
    if not args.skip_postgres:
        part2(args.rows, args.run_rows, args.repeat, args.keep)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
