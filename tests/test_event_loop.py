"""Store reads run off the event loop: /healthz answers promptly while a large export
streams from the same server."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow, new_record_id
from service.testing.live import LiveServer

RECORDS = 10_000
HEALTHZ_BUDGET_S = 0.100


def _seed(db_url: str) -> None:
    """10,000 records written through the store's own append, as the engine writes them."""
    store = AuditStore(db_url)
    blob = TaskBlobRow(task_hash="0" * 64, verifier="math", task={"answer": "1"})
    for start in range(0, RECORDS, 1000):
        rows = [RecordRow(id=new_record_id(), request_id=None, caller_key_id="seed", task_id=None,
                          task_hash="0" * 64, task_public={"answer": "1"}, verifier="math", verifier_version="1",
                          response_hash="1" * 64, response="x" * 200, components={}, reward=1.0,
                          verdict="correct", evidence={"note": "y" * 200}, flags=[], sandbox_backend="process",
                          usage=None, duration_ms=1.0, group_id=uuid.uuid4().hex, group_index=0)
                for _ in range(start, start + 1000)]
        store.append(rows, [blob])
    store.engine.dispose()


@pytest.mark.slow
def test_healthz_answers_within_100ms_while_10000_records_export(tmp_path: Path):
    db_url = f"sqlite:///{tmp_path / 'audit.db'}"
    _seed(db_url)
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": db_url})
    try:
        exported: list[int] = []

        def export() -> None:
            with server.client() as c, c.stream("GET", "/v1/records/export") as reply:
                exported.append(sum(chunk.count(b"\n") for chunk in reply.iter_bytes()))

        thread = threading.Thread(target=export)
        latencies: list[float] = []
        with httpx.Client(base_url=server.url, timeout=10) as plain:
            plain.get("/healthz")  # connection made before timing
            baseline = _timed_healthz(plain, 20)
            thread.start()
            while thread.is_alive():
                latencies += _timed_healthz(plain, 1)
        thread.join()
        assert exported == [RECORDS]
        assert len(latencies) >= 5, "the export ended before /healthz could be timed during it"
        # Nine answers in ten within the budget; the tenth is left to the scheduler. On a
        # machine so loaded that /healthz is slow even with nothing else to do, the budget
        # is three times that idle figure, measured just before. An export that held the
        # loop would stall /healthz for seconds.
        budget = max(HEALTHZ_BUDGET_S, 3 * _p90(baseline))
        assert _p90(latencies) < budget, (budget, sorted(latencies))
    finally:
        server.stop()


def _timed_healthz(client: httpx.Client, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        assert client.get("/healthz").status_code == 200
        times.append(time.perf_counter() - started)
        time.sleep(0.02)
    return times


def _p90(values: list[float]) -> float:
    return sorted(values)[len(values) * 9 // 10]


# ---------------------------------------------------------------------------------------
# Every route, with a database read long enough to be caught: on Postgres, the tables a
# route reads (all but the key and session tables that authentication needs) are locked
# for HOLD_S while the route runs. A route whose read ran on the event loop would hold
# /healthz for the rest of the lock; one that reads on a worker thread leaves it free.

HOLD_S = 3.0
# The rollups too: the overview and task statistics read them instead of the records (revision 0012).
LOCKED_TABLES = ("records", "labels", "evals", "task_blobs", "tasks", "idempotency", "env_sessions",
                 "rollup_hours", "rollup_tasks")


def _routes(server: LiveServer, ids: dict[str, str]) -> list[tuple[str, str, dict | None]]:
    task = {"verifier": "math", "task_id": "loop/math"}
    return [
        ("POST", "/v1/verify", {**task, "response": r"\boxed{2}"}),
        ("POST", "/v1/groups", {"groups": [{**task, "responses": [r"\boxed{2}"]}]}),
        ("POST", "/v1/openrlhf", {"query": [r"q \boxed{2}"], "labels": [{"task_id": "loop/math"}]}),
        ("POST", "/v1/evals", {"name": "loop", "checkpoint": "c", "families": {"math": [{**task,
                                                                                         "responses": ["2"]}]}}),
        ("GET", f"/v1/evals/{ids['eval']}", None),
        ("GET", f"/v1/evals/{ids['eval']}/compare/{ids['eval']}", None),
        ("POST", "/v1/envs", {"verifier": "tool_state", "task_id": "loop/env"}),
        ("POST", f"/v1/envs/{ids['env']}/step", {"tool": "get_balance", "args": {"account": "alice"}}),
        ("POST", "/v1/tasks", {"task_id": "loop/math", "verifier": "math", "task": {"answer": "2"}}),
        ("GET", "/v1/tasks/loop/math", None),
        ("GET", "/v1/tasks/stats", None),
        ("GET", "/v1/records", None),
        ("GET", f"/v1/records/{ids['record']}", None),
        ("GET", "/v1/records/export", None),
        ("POST", f"/v1/records/{ids['record']}/labels", {"label": "agree"}),
        ("GET", f"/v1/records/{ids['record']}/labels", None),
        ("GET", "/v1/review/queue", None),
        ("GET", "/v1/review/summary", None),
        ("UI", "/ui/", None),
        ("UI", "/ui/records", None),
        ("UI", f"/ui/records/{ids['record']}", None),
        ("UI", f"/ui/groups/{ids['group']}", None),
        ("UI", "/ui/evals", None),
        ("UI", f"/ui/evals/{ids['eval']}", None),
        ("UI", f"/ui/evals/{ids['eval']}/compare/{ids['eval']}", None),
        ("UI", "/ui/review", None),
        ("UI", "/ui/export", None),
    ]


def _prepare(server: LiveServer) -> dict[str, str]:
    from verifiers.tool_state.examples import transfer_task

    with server.client() as c:
        assert c.post("/v1/tasks", json={"task_id": "loop/math", "verifier": "math",
                                         "task": {"answer": "2"}}).status_code == 201
        assert c.post("/v1/tasks", json={"task_id": "loop/env", "verifier": "tool_state",
                                         "task": transfer_task()}).status_code == 201
        group = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task_id": "loop/math",
                                                       "responses": [r"\boxed{2}", "3"]}]}).json()["groups"][0]
        run = c.post("/v1/evals", json={"name": "loop", "checkpoint": "c", "families": {
            "math": [{"verifier": "math", "task_id": "loop/math", "responses": ["2"]}]}}).json()
        env = c.post("/v1/envs", json={"verifier": "tool_state", "task_id": "loop/env"}).json()
    return {"record": group["results"][0]["record_id"], "group": group["group_id"], "eval": run["id"],
            "env": env["env_id"]}


def _healthz_within(client: httpx.Client, released_at: float) -> float:
    """Seconds /healthz took; a loop held until the locks go counts as blocked for the rest of the hold."""
    started = time.perf_counter()
    try:
        assert client.get("/healthz", timeout=max(released_at - time.monotonic(), 0.1) + 0.5).status_code == 200
    except httpx.TimeoutException:
        return HOLD_S
    time.sleep(0.02)
    return time.perf_counter() - started


# Routes share one hold, a batch at a time: a route that read on the loop would hold /healthz
# for the rest of the hold whichever other routes wait beside it, so a batch detects it as one
# route alone would. The batch is small enough that each of its routes gets a connection from
# the server's pool (SQLAlchemy's default, 5 + 10 overflow) while the tables are locked: every
# route meets the lock, none waits for a connection the others hold.
BATCH = 7


def _hold(db, plain: httpx.Client, calls: list) -> tuple[float, list[tuple[int, float]]]:
    """Lock the tables, run `calls` concurrently for HOLD_S, then release: the worst /healthz
    seen meanwhile and each call's (status, seconds)."""
    answered: list[tuple[int, float] | None] = [None] * len(calls)

    def run(index: int, call) -> None:
        started = time.monotonic()
        reply = call()
        reply.read()
        answered[index] = (reply.status_code, time.monotonic() - started)

    db.execute(f"LOCK TABLE {', '.join(LOCKED_TABLES)} IN ACCESS EXCLUSIVE MODE")
    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    released_at = time.monotonic() + HOLD_S
    worst = 0.0
    while time.monotonic() < released_at:
        worst = max(worst, _healthz_within(plain, released_at))
    db.commit()  # releases the locks
    for thread in threads:
        thread.join(timeout=60)
    assert all(answered), answered
    return worst, answered


@pytest.mark.slow
@pytest.mark.postgres
def test_no_route_reads_the_database_on_the_event_loop(tmp_path: Path):
    import psycopg

    from service.testing.ui import sign_in
    from tests.test_edge_guard import _postgres_database

    databases = _postgres_database()
    database = next(databases)
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": database})
    try:
        ids = _prepare(server)
        browser = sign_in(server, server.admin_key)
        blocked: dict[str, float] = {}
        with server.client() as api, httpx.Client(base_url=server.url, timeout=30) as plain, \
                psycopg.connect(database.replace("postgresql+psycopg://", "postgresql://")) as db:
            plain.get("/healthz")
            routes = _routes(server, ids)
            for first in range(0, len(routes), BATCH):
                batch = routes[first:first + BATCH]
                calls = [functools.partial(browser.get, path) if method == "UI"
                         else functools.partial(api.request, method, path, json=body)
                         for method, path, body in batch]
                worst, answered = _hold(db, plain, calls)
                for (_, path, _), (status, took) in zip(batch, answered, strict=True):
                    assert status < 500, (path, status)
                    # The route really waited on the lock: its read was long enough to be caught.
                    assert took >= HOLD_S * 0.6, (path, took)
                blocked[" | ".join(f"{method} {path}" for method, path, _ in batch)] = worst
                if worst > HOLD_S / 2:  # which of them: each again, alone
                    for call, (method, path, _) in zip(calls, batch, strict=True):
                        blocked[f"{method} {path}"] = _hold(db, plain, [call])[0]
        slow = {routes: worst for routes, worst in blocked.items() if worst > HOLD_S / 2}
        assert not slow, slow
        browser.close()
    finally:
        server.stop()
        next(databases, None)
