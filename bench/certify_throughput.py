"""Task certification: throughput on a dataset of sound tasks, and how many seeded broken
tasks it catches.

Usage: python bench/certify_throughput.py [--tasks 1000] [--broken 70] [--backend process]

A server (2 warm sandbox workers) certifies `--tasks` sound tasks of four families (math,
SQL, tool state, code) through POST /v1/tasks/certify, 64 tasks a request, 2 requests in
flight. Baseline, in the same run and on the same server: the very responses certification
judges (each reference twice, every probe) sent as plain /v1/groups, so the ratio is what
certification adds on top of the judging it needs. Then a seeded set of broken tasks (golds
that cannot be parsed, tests that `pass` satisfies, flaky tests, a test that fails to
collect, golds that `SELECT 1` matches, order the data cannot show, states with no way to
them) is certified and the bench prints how many were quarantined, and how many sound tasks
were (false quarantines).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.testing.live import LiveServer  # noqa: E402
from verifiers import registry  # noqa: E402
from verifiers.tool_state.examples import bank_state, transfer_task  # noqa: E402

BATCH = 64
IN_FLIGHT = 2
ADD_REFERENCE = "```python\ndef f(a, b):\n    return a {op} b\n```"
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
EMP_SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary INT);"


def emp_instance(rng: random.Random, rows: int) -> str:
    values = ",".join(f"({i},'n{rng.randrange(10_000)}','d{rng.randrange(4)}',{rng.randrange(1, 1000)})"
                      for i in range(1, rows + 1))
    return f"INSERT INTO emp VALUES {values};"


def math_task(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(4)
    if kind == 0:
        answer = str(rng.randrange(2, 10_000))
    elif kind == 1:
        answer = f"\\frac{{{rng.randrange(1, 50)}}}{{{rng.randrange(51, 99)}}}"
    elif kind == 2:
        answer = f"{rng.randrange(2, 9)}\\sqrt{{{rng.choice([2, 3, 5, 7])}}}"
    else:
        answer = f"({rng.randrange(-9, 0)}, {rng.randrange(1, 9)}]"
    return {"verifier": "math", "task": {"answer": answer}}


def sql_task(rng: random.Random) -> dict[str, Any]:
    threshold = rng.randrange(100, 500)
    gold = rng.choice([f"SELECT name FROM emp WHERE salary > {threshold}",
                       "SELECT dept, count(*) FROM emp GROUP BY dept",
                       # Enough rows under the threshold that the instances show the order.
                       f"SELECT name, salary FROM emp WHERE salary < {threshold + 500} ORDER BY salary DESC, id"])
    return {"verifier": "sql", "task": {"schema": EMP_SCHEMA, "gold": gold,
                                        "instances": [emp_instance(rng, 12), emp_instance(rng, 7)]}}


def tool_task(rng: random.Random) -> dict[str, Any]:
    amount = rng.randrange(1, 900)
    return {"verifier": "tool_state", "task": transfer_task(
        gold_actions=[{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": amount}}],
        required_outputs=[str(950 - amount)])}


def code_task(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(list(OPS))
    a, b = rng.randrange(-50, 50), rng.randrange(-50, 50)
    tests = f"def check(candidate):\n    assert candidate({a}, {b}) == {OPS[op](a, b)}\n" \
            f"    assert candidate(3, 4) == {OPS[op](3, 4)}\n"
    return {"verifier": "code", "task": {"entry_point": "f", "tests": tests},
            "reference": ADD_REFERENCE.format(op=op)}


def sound_tasks(n: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    makers = [(math_task, 0.6), (sql_task, 0.2), (tool_task, 0.15), (code_task, 0.05)]
    out = []
    for maker, share in makers:
        out += [maker(rng) for _ in range(round(n * share))]
    return out[:n]


def broken_tasks(n: int) -> list[tuple[str, dict[str, Any]]]:
    """(kind, task) pairs, each kind a failure RL teams report, `n` in all."""
    flaky = "import os\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    assert os.urandom(1)[0] < 128\n"
    add = ADD_REFERENCE.format(op="+")
    frozen = bank_state()
    frozen["accounts"]["A3"]["frozen"] = True
    kinds: list[tuple[str, Any]] = [
        ("math_unparseable_gold", lambda i: {"verifier": "math", "task": {"answer": f"\\frac{{{i}}}{{"}}),
        ("math_gold_is_a_sentence", lambda i: {"verifier": "math", "task": {
            "answer": f"we need {i} apples and then some more of them"}}),
        ("code_pass_satisfies", lambda i: {"verifier": "code", "reference": add, "task": {
            "entry_point": "f", "tests": f"def check(candidate):\n    candidate({i}, 1)\n"}}),
        ("code_flaky", lambda i: {"verifier": "code", "reference": add, "task": {
            "entry_point": "f", "tests": flaky}}),
        ("code_collection_error", lambda i: {"verifier": "code", "reference": add, "task": {
            "entry_point": "f", "tests": f"def check(candidate):\n    assert candidate(1, {i}) == expected_{i}\n"}}),
        ("sql_gold_matches_select_1", lambda i: {"verifier": "sql", "task": {
            "schema": EMP_SCHEMA, "instances": [emp_instance(random.Random(i), 5)], "gold": "SELECT 1"}}),
        ("sql_order_the_data_cannot_show", lambda i: {"verifier": "sql", "task": {
            "schema": EMP_SCHEMA, "instances": [emp_instance(random.Random(i), 5)],
            "gold": "SELECT name FROM emp ORDER BY id"}}),
        ("tool_state_no_way_to_the_state", lambda i: {"verifier": "tool_state", "task": transfer_task(
            gold_actions=[], expected_state=frozen, required_outputs=[])}),
    ]
    return [(kinds[i % len(kinds)][0], kinds[i % len(kinds)][1](i)) for i in range(n)]


def certify_all(server: LiveServer, tasks: list[dict[str, Any]], runs: int) -> tuple[float, list[dict[str, Any]]]:
    batches = [tasks[i:i + BATCH] for i in range(0, len(tasks), BATCH)]

    def send(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with server.client(timeout=1800) as c:
            reply = c.post("/v1/tasks/certify", json={"tasks": batch, "runs": runs})
            reply.raise_for_status()
            return reply.json()["certificates"]

    started = time.perf_counter()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        out = [c for part in pool.map(send, batches) for c in part]
    return time.perf_counter() - started, out


def judged_responses(item: dict[str, Any], runs: int) -> list[str]:
    """What certification judges for a task: its reference `runs` times and every probe."""
    verifier = registry.get(item["verifier"])
    task = verifier.parse_task(item["task"])
    reference = verifier.reference(task, item.get("reference"))
    probes = [p.response for p in verifier.probes(task, reference)]
    return ([reference] * runs if reference else []) + probes


def baseline(server: LiveServer, tasks: list[dict[str, Any]], runs: int) -> tuple[float, int]:
    groups = [{"verifier": t["verifier"], "task": t["task"], "responses": judged_responses(t, runs)} for t in tasks]
    requests = [groups[i:i + BATCH] for i in range(0, len(groups), BATCH)]

    def send(batch: list[dict[str, Any]]) -> None:
        with server.client(timeout=1800) as c:
            c.post("/v1/groups", json={"groups": batch}).raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        list(pool.map(send, requests))
    return time.perf_counter() - started, sum(len(g["responses"]) for g in groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--broken", type=int, default=80)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--backend", default="process")
    args = parser.parse_args()
    tasks = sound_tasks(args.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp), env={"ASSAY_SANDBOX": args.backend})
        try:
            certify_all(server, tasks[:20], args.runs)  # warm every family's workers
            base_s, responses = baseline(server, tasks, args.runs)
            cert_s, certs = certify_all(server, tasks, args.runs)
            broken = broken_tasks(args.broken)
            _, broken_certs = certify_all(server, [t for _, t in broken], max(args.runs, 4))
        finally:
            server.stop()
    statuses = Counter(c["status"] for c in certs)
    false_quarantines = Counter((c["verifier"], c["reasons"][0][:80]) for c in certs if c["reasons"])
    print(f"sound tasks: {len(tasks)} ({dict(Counter(t['verifier'] for t in tasks))}), {responses} judged responses")
    print(f"baseline /v1/groups of the same responses: {base_s:.1f} s ({responses / base_s:.0f} responses/s)")
    print(f"certification:                            {cert_s:.1f} s ({len(tasks) / cert_s:.1f} tasks/s)")
    print(f"ratio certification / baseline time: {cert_s / base_s:.2f}x")
    print(f"sound tasks certified: {statuses['certified']}, quarantined: {statuses['quarantined']} "
          f"{dict(false_quarantines)}")
    caught = Counter(kind for (kind, _), c in zip(broken, broken_certs, strict=True) if c["status"] == "quarantined")
    seeded = Counter(kind for kind, _ in broken)
    print(f"seeded broken tasks caught: {sum(caught.values())} of {len(broken)}")
    for kind in seeded:
        print(f"  {kind:<32} {caught[kind]} of {seeded[kind]}")


if __name__ == "__main__":
    main()
