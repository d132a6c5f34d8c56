"""`assay serve` with several API processes (ASSAY_API_PROCESSES, service/serve_processes.py):
one port, one audit log with a chain per process, metrics summed over the processes, a
process that dies replaced without losing an answered record, and SIGTERM ending them all.

Slow: real servers with sandboxes, many connections, a kill -9.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service.store import AuditStore
from service.testing.live import LiveServer, free_port
from service.testing.ray_cluster import descendants, kill_tree
from tests.test_audit_chain import audit_verify

pytestmark = pytest.mark.slow

# Label order differs between one process's exposition and the summed one.
VERIFIED = re.compile(r'^assay_verifications_total\{[^}]*verifier="math"[^}]*\} ([0-9.e+]+)$', re.M)


def api_processes(supervisor: int) -> list[int]:
    """The API processes under `assay serve`'s supervisor (not their sandbox workers)."""
    found = []
    for pid in descendants(supervisor):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--fd" in cmdline and b"service.cli" in cmdline:
            found.append(pid)
    return found


def _alive(pid: int) -> bool:
    """Running: not gone and not a zombie waiting for whoever adopted it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _request(k: int) -> tuple[str, dict, list[float]]:
    """A single answer or a group, each its own task; the rewards an honest verifier gives."""
    gold = 5000 + k
    if k % 3:
        return "/v1/verify", {"verifier": "math", "task": {"answer": str(gold)},
                              "response": f"\\boxed{{{gold + k % 2}}}", "request_id": f"r{k}"}, [1.0 - k % 2]
    responses = [f"\\boxed{{{gold + j % 2}}}" for j in range(4)]
    return "/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": str(gold)}, "responses": responses}]}, \
        [1.0, 0.0, 1.0, 0.0]


def _results(path: str, answer: dict) -> list[dict]:
    return [answer] if path == "/v1/verify" else answer["groups"][0]["results"]


def _send(server: LiveServer, k: int, attempts: int = 20) -> list[dict]:
    """One request on a connection of its own (so the kernel spreads them over the processes),
    sent again with the same request id / body when the process holding it died."""
    path, body, rewards = _request(k)
    for _ in range(attempts):
        try:
            with server.client(timeout=60) as c:
                reply = c.post(path, json=body)
        except httpx.TransportError:
            time.sleep(0.2)
            continue
        assert reply.status_code == 200, reply.text
        results = _results(path, reply.json())
        assert [r["reward"] for r in results] == rewards, (k, results)
        return results
    raise AssertionError(f"request {k}: no answer in {attempts} attempts")


def _verified_total(metrics_text: str) -> float:
    return sum(float(v) for v in VERIFIED.findall(metrics_text))


def _until(condition: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_two_api_processes_share_one_port_one_log_and_their_metrics(tmp_path: Path):
    server = LiveServer(tmp_path, env={"ASSAY_API_PROCESSES": "2", "ASSAY_SANDBOX_WORKERS": "2"})
    assert server.proc is not None
    try:
        children = api_processes(server.proc.pid)
        assert len(children) == 2, children
        with server.anonymous() as c:  # each process has its share of the two sandbox workers
            assert c.get("/readyz").json()["sandbox"]["workers_per_pool"] == 1
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda k: _send(server, k, attempts=1), range(90)))
        responses = sum(len(a) for a in answers)
        with server.anonymous() as c:  # whichever process answers the scrape counts both
            assert _verified_total(c.get("/metrics").text) == responses
    finally:
        server.stop()
    assert not any(_alive(pid) for pid in children), "SIGTERM left an API process behind"

    store = AuditStore(server.db_url)
    records = store.records_by_ids([r["record_id"] for a in answers for r in a])
    store.engine.dispose()
    assert len(records) == responses
    # Both processes answered, each on chains of its own.
    slots = {re.sub(r"\.\d+$", "", row.chain_id).rsplit(".", 1)[1] for row in records.values()}
    assert slots == {"p0", "p1"}, slots
    result = audit_verify(server.db_url, tmp_path / "audit.signing-key.pem")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_killed_api_process_is_replaced_and_no_answered_record_is_lost(tmp_path: Path):
    """And when the supervisor itself is killed, its API processes end rather than serve on."""
    metrics_port = free_port()
    server = LiveServer(tmp_path, env={"ASSAY_API_PROCESSES": "2", "ASSAY_SANDBOX_WORKERS": "2",
                                       "ASSAY_METRICS_PORT": str(metrics_port)})
    assert server.proc is not None
    answered: list[dict] = []
    lock = threading.Lock()
    next_k = iter(range(10_000))
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            with lock:
                k = next(next_k)
            results = _send(server, k)
            with lock:
                answered.extend(results)

    try:
        before = api_processes(server.proc.pid)
        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        _until(lambda: len(answered) >= 60)
        killed = kill_tree(before[0])  # SIGKILL, its sandbox workers too: no shutdown at all
        _until(lambda: len(set(api_processes(server.proc.pid)) - set(before)) == 1)
        with lock:
            at_kill = len(answered)
        _until(lambda: len(answered) >= at_kill + 60)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        # The supervisor's metrics port sums every process that ran, the killed one too.
        metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).text
        assert _verified_total(metrics) >= len(answered)
        serving = api_processes(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        _until(lambda: not any(_alive(pid) for pid in serving), timeout_s=60)
    finally:
        stop.set()
        server.stop()
    assert len(killed) > 1  # the API process and its sandbox workers

    ids = [r["record_id"] for r in answered]
    store = AuditStore(server.db_url)
    found = store.records_by_ids(ids)
    store.engine.dispose()
    missing = sorted(set(ids) - set(found))
    assert not missing, f"{len(missing)} answered records are missing, e.g. {missing[:3]}"
    result = audit_verify(server.db_url, tmp_path / "audit.signing-key.pem")
    assert result.returncode == 0, result.stdout + result.stderr
