"""The reward client against the real app (in-process, through `transport=`), with real network
faults injected by a small TCP proxy in front of it (lost answers, stalls), and a saturated app."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from trainer_client.client import AsyncRewardClient, RetryPolicy, RewardClient, parse_retry_after
from trainer_client.results import ErrorPolicy, RewardError, RewardRequestError, group_stats

FAST_RETRY = RetryPolicy(max_attempts=4, backoff_s=0.05, max_backoff_s=2.0)


class FaultProxy:
    """Forwards each HTTP request to the real server; the first requests can be answered
    with a fault: `drop` (the server handled it, the answer is lost) or `stall` (the answer
    is held until the client gives up and hangs up, then lost). Also measures concurrent
    requests."""

    def __init__(self, upstream: httpx.Client, faults: list[str] | None = None) -> None:
        self.upstream = upstream
        self.faults = list(faults or [])
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.idempotency_keys: list[str | None] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:])
            length = int({k.lower(): v for k, v in headers.items()}.get("content-length", "0"))
            while len(body) < length:
                body += conn.recv(65536)
            with self._lock:
                fault = self.faults.pop(0) if self.faults else "pass"
                self.requests += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                self.idempotency_keys.append({k.lower(): v for k, v in headers.items()}.get("idempotency-key"))
            try:
                keep = {k: v for k, v in headers.items() if k.lower() in ("authorization", "content-type",
                                                                          "idempotency-key")}
                resp = self.upstream.request(method, path, headers=keep, content=body, timeout=120)
                if fault == "stall":
                    conn.settimeout(60)
                    with contextlib.suppress(OSError):
                        conn.recv(1)  # b"" once the client closes the connection (its timeout)
            finally:
                # Counted out before the client can see the answer (or the closed connection)
                # and send its next request, so the measured concurrency is exact.
                with self._lock:
                    self.in_flight -= 1
            if fault != "pass":
                return  # the answer is lost: close without a response
            out = (f"HTTP/1.1 {resp.status_code} X\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(resp.content)}\r\nConnection: close\r\n")
            if "retry-after" in resp.headers:
                out += f"Retry-After: {resp.headers['retry-after']}\r\n"
            conn.sendall(out.encode() + b"\r\n" + resp.content)


@pytest.fixture
def proxy(app_server):
    made: list[FaultProxy] = []
    upstream = app_server.anonymous()

    def make(faults: list[str] | None = None) -> FaultProxy:
        p = FaultProxy(upstream, faults)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()
    upstream.close()


def in_process(app_server, key: str | None = None, **kwargs) -> RewardClient:
    return RewardClient(app_server.url, key or app_server.admin_key, transport=app_server.transport, **kwargs)


def register(app_server, answer: str = "7") -> str:
    task_id = f"client-test/{uuid.uuid4().hex}"
    with app_server.client() as http:
        r = http.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": {"answer": answer}})
        assert r.status_code == 201, r.text
    return task_id


def records_for(app_server, task_id: str) -> int:
    with app_server.client() as http:
        r = http.get("/v1/records", params={"task_id": task_id, "limit": 1000})
        assert r.status_code == 200, r.text
        return len(r.json()["records"])


def test_groups_keep_verdicts_rewards_and_golden_advantages(app_server) -> None:
    with in_process(app_server) as client:
        out = client.score_groups([
            {"verifier": "math", "task": {"answer": "7"}, "responses": ["\\boxed{7}", "6", "8", "5"]},
            {"verifier": "math", "task": {"answer": "3"}, "responses": ["3", "3", "the answer is 3", "\\boxed{3}"]},
            {"verifier": "math", "task": {"answer": "2"}, "responses": ["2", "no idea\nreally none"]},
        ])
    first, same, third = out
    assert first.verdicts == ["correct", "incorrect", "incorrect", "incorrect"]
    assert first.rewards == [1.0, 0.0, 0.0, 0.0]
    assert first.advantages == pytest.approx([1.4997, -0.4999, -0.4999, -0.4999], abs=1e-4)
    assert all(r.record_id for r in first.results)
    assert same.zero_variance and same.advantages == pytest.approx([0, 0, 0, 0])
    assert third.results[1].verdict == "invalid_format"
    assert third.results[0].component_values() == {"format": 1.0, "correctness": 1.0}
    assert client.stats.take()["reward_service/responses"] == 10


def test_requests_are_bounded_in_size_and_concurrency(app_server, proxy) -> None:
    p = proxy()
    groups = [{"verifier": "math", "task": {"answer": str(i)}, "responses": [str(i), "0", "1"]} for i in range(2, 8)]
    groups.append({"verifier": "math", "task": {"answer": "5"}, "responses": ["5"] * 3 + ["4"] * 7})
    with RewardClient(p.url, app_server.admin_key, max_responses_per_request=4, max_concurrency=2) as client:
        out = client.score_groups(groups)
    # 6 groups of 3 fit one per request (3 + 3 > 4); the 10-response group is split into 4 + 4 + 2.
    assert p.requests == 6 + 3
    assert p.max_in_flight <= 2
    assert len(set(p.idempotency_keys)) == p.requests  # one key per logical request
    big = out[-1]
    assert big.rewards == [1.0] * 3 + [0.0] * 7
    advantages, mean, std, zero = group_stats(big.rewards)
    assert big.advantages == pytest.approx(advantages) and big.mean == pytest.approx(mean)
    assert [g.rewards[0] for g in out[:-1]] == [1.0] * 6


def test_lost_answer_is_retried_with_the_same_key_and_logged_once(app_server, proxy) -> None:
    task_id = register(app_server)
    p = proxy(["drop"])
    with RewardClient(p.url, app_server.admin_key, retry=FAST_RETRY) as client:
        out = client.score_groups([{"verifier": "math", "task_id": task_id, "responses": ["7", "1", "2", "7"]}])
        stats = client.stats.take()
    assert out[0].rewards == [1.0, 0.0, 0.0, 1.0]
    assert stats["reward_service/retries"] == 1
    assert p.idempotency_keys[0] == p.idempotency_keys[1]
    # The server verified the first attempt; the retry got the stored answer: 4 records, not 8.
    assert records_for(app_server, task_id) == 4


def test_timeout_is_retried_and_counted(app_server, proxy) -> None:
    task_id = register(app_server)
    p = proxy(["stall"])
    with RewardClient(p.url, app_server.admin_key, timeout_s=0.7, retry=FAST_RETRY) as client:
        out = client.score_groups([{"verifier": "math", "task_id": task_id, "responses": ["7", "3"]}])
        stats = client.stats.take()
    assert out[0].verdicts == ["correct", "incorrect"]
    assert stats["reward_service/timeouts"] == 1
    assert records_for(app_server, task_id) == 2


def test_unreachable_service_gives_error_verdicts_never_rewards() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    retry = RetryPolicy(max_attempts=2, backoff_s=0.01)
    with RewardClient(f"http://127.0.0.1:{port}", "ak_x_y", retry=retry) as client:
        group = client.score_groups([{"verifier": "math", "task": {"answer": "1"}, "responses": ["1", "2"]}])[0]
        stats = client.stats.take()
    assert group.verdicts == ["error", "error"]
    assert group.results[0].flags == ["client:connection"]
    assert group.rewards_under(ErrorPolicy.drop) == [None, None]
    assert group.rewards_under("zero") == [0.0, 0.0]
    with pytest.raises(RewardError):
        group.rewards_under("raise")
    assert stats["reward_service/failed_requests"] == 1 and stats["reward_service/errors"] == 2


@pytest.mark.slow
def test_saturated_service_is_retried_honouring_retry_after(tmp_path) -> None:
    # Holds the whole in-flight budget (2) for a while: code responses that sleep in their sandbox.
    slow_group = {"verifier": "code", "task": {"entry_point": "add", "time_limit_s": 20,
                                               "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n"},
                  "responses": ["```python\nimport time\ntime.sleep(8)\ndef add(a, b):\n    return a + b\n```"] * 2}
    server = AppServer(app_settings(tmp_path, max_inflight_responses=2, retry_after_s=1)).start()
    try:
        with server.client() as c:
            slow = threading.Thread(target=lambda: c.post("/v1/groups", json={"groups": [slow_group]}))
            slow.start()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "assay_inflight_responses 2.0" not in c.get("/metrics").text:
                time.sleep(0.05)
            retry = RetryPolicy(max_attempts=3, backoff_s=0.0)  # any wait comes from Retry-After
            with in_process(server, retry=retry) as client:
                started = time.monotonic()
                group = client.score_groups([{"verifier": "math", "task": {"answer": "1"}, "responses": ["1"]}])[0]
                elapsed = time.monotonic() - started
                slow.join()
                # Once the budget is free again it is served normally.
                ok = client.score_groups([{"verifier": "math", "task": {"answer": "1"}, "responses": ["1", "2"]}])[0]
    finally:
        server.stop()
    assert elapsed >= 2.0  # two waits of Retry-After: 1
    assert group.verdicts == ["error"] and group.results[0].flags == ["client:http_503"]
    assert ok.rewards == [1.0, 0.0]


def test_client_errors_are_raised_not_retried(app_server) -> None:
    with in_process(app_server, retry=FAST_RETRY) as client:
        with pytest.raises(RewardRequestError) as info:
            client.score_groups([{"verifier": "no-such-verifier", "task": {}, "responses": ["1"]}])
        assert info.value.status == 422
        assert client.stats.take()["reward_service/http_requests"] == 1
    with in_process(app_server, "ak_bad_key") as client, pytest.raises(RewardRequestError) as info:
        client.verify("math", "1", task={"answer": "1"})
    assert info.value.status == 401


def test_verify_one_is_idempotent_by_request_id(app_server) -> None:
    with in_process(app_server) as client:
        a = client.verify("math", "x = 12", task={"answer": "12"}, request_id="rid-" + uuid.uuid4().hex)
        b = client.verify("math", "x = 12", task={"answer": "12"}, request_id=a.request_id)
    assert a.verdict == "correct" and a.reward == 1.0
    assert a.record_id == b.record_id


def test_async_client_bounds_concurrency(app_server, proxy) -> None:
    p = proxy(["drop"])

    async def main():
        async with AsyncRewardClient(p.url, app_server.admin_key, max_responses_per_request=2,
                                     max_concurrency=2, retry=FAST_RETRY) as client:
            groups = [{"verifier": "math", "task": {"answer": str(i)}, "responses": [str(i), "9"]} for i in range(8)]
            out = await client.score_groups(groups)
            single = await client.verify("math", "\\boxed{4}", task={"answer": "4"})
            return out, single, client.stats.take()

    out, single, stats = asyncio.run(main())
    assert [g.rewards for g in out] == [[1.0, 0.0]] * 8
    assert single.verdict == "correct"
    assert p.max_in_flight <= 2
    assert stats["reward_service/retries"] == 1


def test_client_imports_no_service_code_and_no_torch() -> None:
    """A trainer installs the client without FastAPI, Docker or the service's packages."""
    code = ("import sys, trainer_client, trainer_client.adapters.trl, trainer_client.adapters.verl\n"
            "bad = {'service', 'verifiers', 'sandboxes', 'fastapi', 'docker', 'torch', 'sqlalchemy'}\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= parse_retry_after(when) <= 31
    assert RetryPolicy(max_backoff_s=5).delay(0, "100") == 5  # a hint is capped


def test_async_client_in_process_through_transport(app_server) -> None:
    async def main():
        async with AsyncRewardClient(app_server.url, app_server.admin_key,
                                     transport=app_server.async_transport(), max_responses_per_request=2) as client:
            return await client.score_groups([{"verifier": "math", "task": {"answer": "4"},
                                               "responses": ["\\boxed{4}", "5", "4", "no"]}])

    [group] = asyncio.run(main())
    assert group.verdicts == ["correct", "incorrect", "correct", "invalid_format"]
    assert group.advantages == pytest.approx(group_stats(group.rewards)[0])
