"""Many trainer workers sampling the same prompts: concurrent requests that store the
same new task (and register the same task id) all succeed, and every record they were
given is in the audit log. On SQLite and on Postgres, through a real server."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from service.testing.app import AppServer, app_settings
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)

CLIENTS = 8
ROUNDS = 4


def _hammer(server: AppServer) -> None:
    run = str(uuid.uuid4().int % 10**8)  # digits: each answer is a number the math judge parses
    barrier = threading.Barrier(CLIENTS)
    statuses: list[int] = []
    record_ids: list[str] = []
    registered: list[bool] = []
    lock = threading.Lock()

    def client(worker: int) -> None:
        with server.client(timeout=120) as c:
            for round_ in range(ROUNDS):
                # Every client stores the same two new tasks at the same instant; the groups overlap.
                tasks = [{"answer": f"{run}{round_}{k}"} for k in range(2)]
                groups = {"groups": [{"verifier": "math", "task": task, "responses": [task["answer"], "0"]}
                                     for task in tasks[worker % 2:] + tasks[:worker % 2]]}
                task_id = f"concurrent/{run}/{round_}"
                barrier.wait()
                reg = c.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": tasks[0]})
                reply = c.post("/v1/groups", json=groups)
                by_id = c.post("/v1/verify", json={"verifier": "math", "task_id": task_id, "response": "1"})
                with lock:
                    statuses.extend([reg.status_code, reply.status_code, by_id.status_code])
                    if reg.status_code == 201:
                        registered.append(reg.json()["created"])
                    if reply.status_code == 200:
                        record_ids.extend(r["record_id"] for g in reply.json()["groups"] for r in g["results"])
                    if by_id.status_code == 200:
                        record_ids.append(by_id.json()["record_id"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s for s in statuses if s >= 500] == [] and set(statuses) <= {200, 201}, statuses
    # Each task id was created by exactly one of the racing registrations.
    assert registered.count(True) == ROUNDS and len(registered) == CLIENTS * ROUNDS
    assert len(record_ids) == CLIENTS * ROUNDS * 5 == len(set(record_ids))
    with server.client() as c:
        for record_id in record_ids:
            assert c.get(f"/v1/records/{record_id}").status_code == 200, record_id


@pytest.mark.slow
def test_concurrent_identical_tasks_on_sqlite(tmp_path: Path):
    with AppServer(app_settings(tmp_path)) as server:
        _hammer(server)


@pytest.mark.slow
@pytest.mark.postgres
def test_concurrent_identical_tasks_on_postgres(tmp_path: Path, database: str):  # noqa: F811
    with AppServer(app_settings(tmp_path, database_url=database)) as server:
        _hammer(server)
