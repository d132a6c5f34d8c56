"""Durability under group commit: `kill -9` of a real server while requests are in flight loses
no record whose request was answered, and the hash chain still verifies (the rows of requests
that were never answered may or may not be there; none is half there).

Slow: a real uvicorn server with sandboxes, eight clients, then a restart.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from service.store import AuditStore
from service.testing.ray_cluster import kill_tree
from tests.conftest import LiveServer
from tests.test_audit_chain import audit_verify

pytestmark = pytest.mark.slow


def _body(client: int, i: int) -> tuple[str, dict]:
    """Single answers and groups of 8, each a task of its own, right and wrong answers."""
    gold = client * 1000 + i
    if i % 2:
        return "/v1/verify", {"verifier": "math", "task": {"answer": str(gold)}, "response": f"\\boxed{{{gold}}}"}
    return "/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": str(gold)},
                                      "responses": [f"\\boxed{{{gold + k % 2}}}" for k in range(8)]}]}


def _record_ids(path: str, answer: dict) -> list[str]:
    if path == "/v1/verify":
        return [answer["record_id"]]
    return [r["record_id"] for g in answer["groups"] for r in g["results"]]


def test_kill_9_loses_no_answered_record_and_the_chain_verifies(tmp_path: Path):
    server = LiveServer(tmp_path)
    answered: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    lost_connections = 0

    def client(k: int) -> None:
        nonlocal lost_connections
        with server.client(timeout=60) as c:
            i = 0
            while not stop.is_set():
                path, body = _body(k, i)
                i += 1
                try:
                    reply = c.post(path, json=body)
                except httpx.TransportError:  # the server died with this request in flight: not answered
                    with lock:
                        lost_connections += 1
                    return
                assert reply.status_code == 200, reply.text
                with lock:
                    answered.extend(_record_ids(path, reply.json()))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 300
    while len(answered) < 200 and time.monotonic() < deadline and all(t.is_alive() for t in threads):
        time.sleep(0.05)
    assert server.proc is not None
    killed = kill_tree(server.proc.pid)  # SIGKILL: no shutdown, no signing of the heads
    server.proc.wait()
    stop.set()
    for t in threads:
        t.join(timeout=120)
    assert len(answered) >= 200, f"only {len(answered)} records answered before the deadline"
    assert len(killed) > 1 and lost_connections >= 1, (killed, lost_connections)  # requests were in flight

    with lock:
        ids = list(answered)
    store = AuditStore(server.db_url)
    found = store.records_by_ids(ids)
    store.engine.dispose()
    missing = sorted(set(ids) - set(found))
    assert not missing, f"{len(missing)} answered records are missing after kill -9, e.g. {missing[:3]}"
    key = tmp_path / "audit.signing-key.pem"
    result = audit_verify(server.db_url, key)
    assert result.returncode == 0, result.stdout + result.stderr

    # The restarted server links new records after what the killed one committed.
    server.start()
    try:
        with server.client() as c:
            path, body = _body(99, 0)
            reply = c.post(path, json=body)
            assert reply.status_code == 200, reply.text
    finally:
        server.stop()
    result = audit_verify(server.db_url, key)
    assert result.returncode == 0, result.stdout + result.stderr
