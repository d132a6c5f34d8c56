"""Old against new, interleaved at equal load (issue 27 item 3): the reads revision 0015 and its
changes touched, each timed in one process, old and new alternating call by call, on a kept
10M-record database (`bench/audit_scale.py --name`), without HTTP.

The old code is a checkout of the commit before the change (`git archive <commit> | tar -x -C DIR`);
its modules are loaded by path beside the new ones. Both read the same database:

- overview of the last 6 hours (15-minute buckets): from the records (old) / rollup_quarters (new)
- task statistics over the last day: old / new `task_stats`
- viewer label pages (`label=exploit`, newest; with `flag=forbidden_tool`; sort=slowest)

    .venv/bin/python bench/audit_ab.py --old /tmp/a4_base --db assay_audit10m --rounds 5

`--cases runs` (revision 0016): the runs list, a run page's reads (record count and step range,
the step series with a warm step cache, the held-out points), the review summary and the review
queue (plain, per verifier, `flag=exits_process`); `--old /work/main` works while main is the
code before the change (old and new read the same database at the new revision):

    .venv/bin/python bench/audit_ab.py --old /work/main --cases runs --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from service import task_stats as new_task_stats
from service.store import AuditStore
from service.ui import queries as new_queries


def load_old(base: Path, dotted: str):
    path = base / (dotted.replace(".", "/") + ".py")
    spec = importlib.util.spec_from_file_location(f"old_{dotted.replace('.', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="a checkout of the code before the change")
    parser.add_argument("--db", default="assay_audit10m")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", choices=("quarters", "runs"), default="quarters")
    args = parser.parse_args()
    base = (os.environ.get("ASSAY_TEST_POSTGRES_URL") or "postgresql+psycopg://postgres@127.0.0.1:54329/postgres")
    store = AuditStore(base.rsplit("/", 1)[0] + "/" + args.db)
    if args.cases == "runs":
        return runs_cases(store, Path(args.old), args.rounds)
    old_queries = load_old(Path(args.old), "service.ui.queries")
    old_task_stats = load_old(Path(args.old), "service.task_stats")
    with store.db() as s:
        newest = s.execute(text("SELECT max(created_at) FROM records")).scalar()
    since_6h, since_1d = newest - timedelta(hours=6), newest - timedelta(days=1)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; windows end at {newest}",
          flush=True)
    cases = {
        "overview last 6 hours": lambda q: q.overview(store, q.OverviewFilter(since=since_6h.isoformat())),
        "label=exploit newest": lambda q: q.record_page(store, q.RecordFilter(label="exploit"), None),
        "label=exploit flag=forbidden_tool": lambda q: q.record_page(
            store, q.RecordFilter(label="exploit", flag="forbidden_tool"), None),
        "label=exploit sort=slowest": lambda q: q.record_page(store, q.RecordFilter(label="exploit", sort="slowest"),
                                                              None),
    }
    print(f"{'case':40} {'old median ms':>14} {'new median ms':>14}   (old / new each call, alternating)")
    for name, call in cases.items():
        old, new = [], []
        for _ in range(args.rounds):
            old.append(timed(lambda c=call: c(old_queries)))
            new.append(timed(lambda c=call: c(new_queries)))
        print(f"{name:40} {statistics.median(old):14.1f} {statistics.median(new):14.1f}   "
              f"{[round(x) for x in old]} / {[round(x) for x in new]}", flush=True)
    old, new = [], []
    for _ in range(args.rounds):
        old.append(timed(lambda: old_task_stats.task_stats(store, since=since_1d)))
        new.append(timed(lambda: new_task_stats.task_stats(store, since=since_1d)))
    print(f"{'task stats since <1 day before newest>':40} {statistics.median(old):14.1f} "
          f"{statistics.median(new):14.1f}   {[round(x) for x in old]} / {[round(x) for x in new]}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def alternate(cases: dict, old_mod: object, new_mod: object, rounds: int) -> None:
    print(f"{'case':40} {'old median ms':>14} {'new median ms':>14}   (old / new each call, alternating)")
    for name, call in cases.items():
        call(old_mod), call(new_mod)  # per-process caches warm, as in a running service
        old, new = [], []
        for _ in range(rounds):
            old.append(timed(lambda c=call: c(old_mod)))
            new.append(timed(lambda c=call: c(new_mod)))
        print(f"{name:40} {statistics.median(old):14.1f} {statistics.median(new):14.1f}   "
              f"{[round(x) for x in old]} / {[round(x) for x in new]}", flush=True)


def runs_cases(store: AuditStore, old_base: Path, rounds: int) -> None:
    from types import SimpleNamespace

    from service import review as new_review
    from service import runs as new_runs

    old = SimpleNamespace(runs=load_old(old_base, "service.runs"), review=load_old(old_base, "service.review"))
    new = SimpleNamespace(runs=new_runs, review=new_review)
    run = new_runs.list_runs(store, 1)[0].id
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; run {run}", flush=True)

    def run_page(m: SimpleNamespace) -> None:  # what check_run reads (no new alarm to raise)
        m.runs.run_records(store, run)
        m.runs.steps(store, run)
        m.runs.held_out(store, run)

    alternate({
        "runs list": lambda m: m.runs.list_runs(store),
        f"run page reads ({run})": run_page,
        "review summary": lambda m: m.review.review_summary(store),
        "review queue n=30": lambda m: m.review.review_queue(store, None, None, 30),
        "review queue n=30 verifier=code": lambda m: m.review.review_queue(store, "code", None, 30),
        "review queue n=30 flag=exits_process": lambda m: m.review.review_queue(store, None, "exits_process", 30),
    }, old, new, rounds)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
