"""SQL tasks through the `sql` verifier over HTTP vs the same queries run directly.

    python bench/sql_throughput.py [--tasks 125] [--group 8] [--rows 300] [--groups-per-request 5] [--concurrency 4]

Workload: `tasks` generated SQLite tasks (an emp/dept schema, two instances of `rows`
employees each, seeded), each with a gold query from a set of templates (filters,
joins, GROUP BY, ORDER BY, aggregates), and a GRPO group of `group` responses: the gold
rewritten, and wrong variants (DISTINCT where the gold has none, a wrong filter, a lost
ORDER BY, hard-coded rows, a misspelt column) and a DROP TABLE. 125 x 8 = 1,000 pairs.

Assay gets them as /v1/groups requests to a real server (sandboxed SQLite, parser
classification, guards, audit records in SQLite). The baseline, in this same process run,
executes the same queries with Python's `sqlite3` in one process with no guards, no
sandbox, no HTTP: per task it builds each instance in memory once, runs the gold once per
instance and every response on every instance, and compares results as multisets. Read
the ratio: absolute times drift on a shared machine.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.testing.live import LiveServer  # noqa: E402

SCHEMA = (
    "CREATE TABLE dept(id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
    "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER REFERENCES dept(id), "
    "salary REAL, age INTEGER, boss INTEGER);"
)
CITIES = ["oslo", "lima", "pune", "kiev", "rome"]
# (gold, an equivalent rewrite); every template has ORDER BY or not on purpose.
TEMPLATES = [
    ("SELECT name FROM emp WHERE salary > {s} ORDER BY name",
     "SELECT e.name FROM emp AS e WHERE NOT e.salary <= {s} ORDER BY 1"),
    ("SELECT d.name, count(*) FROM emp e JOIN dept d ON e.dept_id = d.id GROUP BY d.name",
     "SELECT d.name, count(e.id) FROM dept d JOIN emp e ON d.id = e.dept_id GROUP BY d.id, d.name"),
    ("SELECT dept_id, avg(salary) FROM emp GROUP BY dept_id HAVING count(*) > {n}",
     "SELECT dept_id, sum(salary) / count(*) FROM emp GROUP BY dept_id HAVING count(*) >= {n} + 1"),
    ("SELECT age FROM emp WHERE dept_id = {d}",
     "SELECT age FROM emp WHERE dept_id IN ({d})"),
    ("SELECT e.name, d.city FROM emp e JOIN dept d ON d.id = e.dept_id WHERE e.age < {a} ORDER BY e.salary DESC, e.id",
     "SELECT e.name, d.city FROM dept d, emp e WHERE d.id = e.dept_id AND e.age < {a} ORDER BY e.salary DESC, e.id"),
    ("SELECT count(*), max(salary), min(age) FROM emp WHERE boss IS NOT NULL",
     "SELECT count(boss), max(salary), min(age) FROM emp WHERE boss IS NOT NULL"),
    ("SELECT b.name, count(*) FROM emp e JOIN emp b ON e.boss = b.id GROUP BY b.id "
     "ORDER BY count(*) DESC, b.id LIMIT 5",
     "SELECT b.name, count(*) AS c FROM emp b JOIN emp e ON e.boss = b.id GROUP BY b.id ORDER BY c DESC, b.id LIMIT 5"),
    ("SELECT city, sum(salary) FROM emp e JOIN dept d ON d.id = e.dept_id GROUP BY city",
     "SELECT d.city, total(e.salary) FROM dept d JOIN emp e ON d.id = e.dept_id GROUP BY d.city"),
]


def instance(rng: random.Random, rows: int) -> str:
    depts = ",".join(f"({i},'d{i}','{rng.choice(CITIES)}')" for i in range(1, 9))
    people = ",".join(
        f"({i},'p{rng.randrange(10 * rows)}',{rng.randrange(1, 9)},{rng.randrange(100, 900) / 4},"
        f"{rng.randrange(20, 65)},{'NULL' if i < 5 else rng.randrange(1, i)})"
        for i in range(1, rows + 1)
    )
    return f"INSERT INTO dept VALUES {depts};\nINSERT INTO emp VALUES {people};"


def make_tasks(n: int, rows: int, group: int, seed: int = 7) -> list[tuple[dict[str, Any], list[str]]]:
    rng = random.Random(seed)
    out = []
    for t in range(n):
        gold_t, rewrite_t = TEMPLATES[t % len(TEMPLATES)]
        params = {"s": rng.randrange(120, 200), "n": rng.randrange(20, 40), "d": rng.randrange(1, 9),
                  "a": rng.randrange(25, 40)}
        gold, rewrite = gold_t.format(**params), rewrite_t.format(**params)
        task = {"dialect": "sqlite", "schema": SCHEMA, "instances": [instance(rng, rows), instance(rng, rows)],
                "gold": gold}
        wrong = [
            gold.replace("SELECT ", "SELECT DISTINCT ", 1),
            gold.replace("salary", "age", 1) if "salary" in gold else gold.replace("age", "id", 1),
            gold.split(" ORDER BY")[0] if " ORDER BY" in gold else gold + " LIMIT 3",
            "SELECT 'p1', 2 UNION ALL SELECT 'p3', 4",
            gold.replace("emp", "empp", 1),
            "DROP TABLE emp",
        ]
        responses = [f"```sql\n{rewrite}\n```", gold, *wrong][:group]
        out.append((task, responses))
    return out


def baseline(tasks: list[tuple[dict[str, Any], list[str]]]) -> tuple[float, Counter]:
    """Unguarded: one process, in-memory databases, results compared as multisets."""
    started = time.perf_counter()
    outcome: Counter = Counter()
    for task, responses in tasks:
        dbs = []
        for script in task["instances"]:
            conn = sqlite3.connect(":memory:")
            conn.executescript(task["schema"])
            conn.executescript(script)
            dbs.append(conn)
        golds = [Counter(conn.execute(task["gold"]).fetchall()) for conn in dbs]
        for response in responses:
            sql = response.removeprefix("```sql\n").removesuffix("\n```")
            ok = True
            for conn, gold in zip(dbs, golds, strict=True):
                try:
                    ok = ok and Counter(conn.execute(sql).fetchall()) == gold
                except sqlite3.Error:
                    ok = False
            outcome["pass" if ok else "fail"] += 1
        for conn in dbs:
            conn.close()
    return time.perf_counter() - started, outcome


def assay(server: LiveServer, tasks: list[tuple[dict[str, Any], list[str]]], per_request: int,
          concurrency: int) -> tuple[float, Counter]:
    batches = [tasks[i:i + per_request] for i in range(0, len(tasks), per_request)]
    verdicts: Counter = Counter()
    with server.client(timeout=600) as client:
        def send(batch: list[tuple[dict[str, Any], list[str]]]) -> list[str]:
            body = {"groups": [{"verifier": "sql", "task": task, "responses": responses} for task, responses in batch]}
            reply = client.post("/v1/groups", json=body)
            reply.raise_for_status()
            return [r["verdict"] for g in reply.json()["groups"] for r in g["results"]]

        # Warm the pool and the connection (not timed), on a task outside the workload.
        warm_task, warm_responses = make_tasks(1, 20, 2, seed=99)[0]
        send([(warm_task, warm_responses)])
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            for result in pool.map(send, batches):
                verdicts.update(result)
        return time.perf_counter() - started, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=125)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--groups-per-request", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    tasks = make_tasks(args.tasks, args.rows, args.group)
    pairs = sum(len(r) for _, r in tasks)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp))
        try:
            direct_s, direct = baseline(tasks)
            assay_s, verdicts = assay(server, tasks, args.groups_per_request, args.concurrency)
        finally:
            server.stop()
    print(f"pairs: {pairs} ({args.tasks} tasks x {args.group}), {args.rows} rows x 2 instances per task")
    print(f"direct sqlite3, unguarded, one process: {direct_s:8.3f} s  {pairs / direct_s:9.1f} pairs/s  {dict(direct)}")
    print(f"assay /v1/groups (sandbox, guards, audit): {assay_s:8.3f} s  {pairs / assay_s:9.1f} pairs/s  "
          f"{dict(verdicts)}")
    print(f"ratio assay / direct: {assay_s / direct_s:.2f}x (target: within 3x)")


if __name__ == "__main__":
    main()
