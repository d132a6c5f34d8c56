"""Held out (written before a run's held-out rows were stored, revision 0019; issue 27 item 3): a
run's held-out points over HTTP equal figures computed by hand from the records — in a fresh
server, in a second fresh server (what the first stored), after a new held-out record at an old
evaluation and a new evaluation (in the same process and in a fresh one), and when two readers of
a fresh server ask at once.

By hand, per evaluation of the run: its step (the first of its judged records), tasks with a
judged record, all its records (errors included), pass@1 (the mean over tasks of correct/judged)
and the mean reward of its judged records."""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from service.store import AuditStore
from service.testing.live import LiveServer
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_run_page import DAY0, _row, _stored, _write

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'held.db'}"
    return request.getfixturevalue("database")


def _evaluation(store: AuditStore, rng: random.Random, run: str, step: int, at, eval_id: str, n: int) -> None:
    store.append([_row(rng, at + timedelta(seconds=i), run, step, None, 0, eval_id=eval_id) for i in range(n)], [])


def _by_hand(store: AuditStore, run: str) -> dict[str, dict]:
    per: dict[str, dict] = {}
    for r in _stored(store):
        if r.run_id != run or r.eval_id is None:
            continue
        e = per.setdefault(r.eval_id, {"records": 0, "tasks": defaultdict(lambda: [0, 0]), "rewards": [],
                                       "steps": []})
        e["records"] += 1
        if r.verdict == "error":
            continue
        task = r.task_id or r.task_hash
        e["tasks"][task][0] += 1
        e["tasks"][task][1] += r.verdict == "correct"
        e["rewards"].append(r.reward)
        e["steps"].append(r.run_step)
    out = {}
    for eval_id, e in per.items():
        if not e["steps"]:
            continue
        out[eval_id] = {"step": min(e["steps"]), "n_tasks": len(e["tasks"]), "n_responses": e["records"],
                        "pass1": sum(c / n for n, c in e["tasks"].values()) / len(e["tasks"]),
                        "mean_reward": sum(e["rewards"]) / len(e["rewards"])}
    return out


def _check(server: LiveServer, store: AuditStore, run: str) -> list[dict]:
    with server.client() as c:
        got = c.get(f"/v1/runs/{run}")
    assert got.status_code == 200, got.text
    points = got.json()["held_out"]
    want = _by_hand(store, run)
    assert sorted(p["eval_id"] for p in points) == sorted(want)
    for p in points:
        w = want[p["eval_id"]]
        assert (p["step"], p["n_tasks"], p["n_responses"]) == (w["step"], w["n_tasks"], w["n_responses"]), p
        assert p["pass_at_k"]["1"] == pytest.approx(w["pass1"], abs=1e-12), p
        assert p["mean_reward"] == pytest.approx(w["mean_reward"], abs=1e-12), p
    return points


def test_held_out_points_are_the_records_across_fresh_servers_and_writes(url: str, tmp_path: Path) -> None:
    rng = random.Random(4411)
    store = AuditStore(url)
    if url.startswith("postgresql"):
        from service import audit_partitions

        with store.engine.begin() as conn:
            audit_partitions.create_partitions(conn, [(DAY0 + timedelta(days=d)).date() for d in range(6)])
    at = _write(store, rng, "ho-a", list(range(0, 5)), DAY0)
    evals = [uuid.uuid4().hex for _ in range(3)]
    for step, eval_id in zip((1, 3, 3), evals, strict=True):
        _evaluation(store, rng, "ho-a", step, at, eval_id, rng.randrange(12, 30))
        at += timedelta(minutes=9)
    _evaluation(store, rng, "ho-b", 0, at, uuid.uuid4().hex, 9)
    env = {"ASSAY_DATABASE_URL": url, "ASSAY_ALARM_CHECK_INTERVAL_S": "3600"}
    server = LiveServer(tmp_path, env=env)
    try:
        first = _check(server, store, "ho-a")
        _check(server, store, "ho-b")
        server.restart()  # a fresh process: what the first stored, or computed again; the same figures
        assert _check(server, store, "ho-a") == first
        # A new record of an old evaluation, and a new evaluation, then read in the same process.
        _evaluation(store, rng, "ho-a", 3, at + timedelta(hours=1), evals[1], 3)
        _evaluation(store, rng, "ho-a", 4, at + timedelta(hours=1, minutes=5), uuid.uuid4().hex, 7)
        after = _check(server, store, "ho-a")
        assert after != first
        server.restart()
        assert _check(server, store, "ho-a") == after
        # One more record, then two readers of a fresh process at once: both the records' figures.
        _evaluation(store, rng, "ho-a", 1, at + timedelta(hours=2), evals[0], 2)
        server.restart()
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: _check(server, store, "ho-a"), range(2)))
        assert both[0] == both[1]
        server.restart()
        assert _check(server, store, "ho-a") == both[0]
    finally:
        server.stop()
        store.close()
