"""`assay serve` limits how long a request may take to arrive (service/read_deadlines.py):
a slowloris client that sends a request line and a header and then nothing, or dribbles a byte
at a time, or sends headers and then part of a body, is answered 408 and closed past the
deadline, and holds nothing afterwards; many such connections at once all go. Honest clients
are not cut: a request whose headers come in pieces within the deadline, a keep-alive
connection's second request, and a verification that runs longer than both deadlines are all
answered with their reward."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.testing.live import LiveServer

HEADER_S, BODY_S = 1.0, 2.0
HONEST = {"verifier": "math", "task": {"answer": "42"}, "response": "The answer is \\boxed{42}."}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    s = LiveServer(Path(tmp_path_factory.mktemp("read-deadlines")),
                   env={"ASSAY_HEADER_TIMEOUT_S": str(HEADER_S), "ASSAY_BODY_TIMEOUT_S": str(BODY_S),
                        "ASSAY_WARM_UP": "math"})
    try:
        yield s
    finally:
        s.stop()


def _connect(server: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=15)


def _read_until_closed(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _read_response(sock: socket.socket) -> bytes:
    """One whole HTTP response (headers, then Content-Length bytes of body), however the
    server's writes arrive."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, f"closed before the response's headers: {got[:200]!r}"
        got += chunk
    head, body = got.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the response's body"
        body += chunk
    return head + b"\r\n\r\n" + body


def _request(server: LiveServer, body: dict, key: str) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST /v1/verify HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


def _records(server: LiveServer) -> int:
    with server.client() as c:
        return len(c.get("/v1/records", params={"limit": 500}).json()["records"])


def _honest_is_rewarded(server: LiveServer) -> None:
    with server.client(server.create_key("reward")) as c:
        reply = c.post("/v1/verify", json=HONEST)
        assert reply.status_code == 200 and reply.json()["reward"] == 1.0, reply.text[:300]


def test_headers_that_stop_coming_are_a_408_and_a_closed_connection(server: LiveServer):
    with _connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\n")
        reply = _read_until_closed(sock)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert HEADER_S * 0.8 <= took < HEADER_S + 5, took
    _honest_is_rewarded(server)


def test_dribbled_header_bytes_do_not_extend_the_deadline(server: LiveServer):
    with _connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /readyz HTTP/1.1\r\n")
        sock.settimeout(0.25)
        reply = b""
        for _ in range(40):  # a byte every quarter second: 10 s if nothing cut it
            try:
                sock.sendall(b"X")
            except OSError:  # the server closed it
                break
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            reply += chunk
            if not chunk:
                break
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert took < HEADER_S + 5, took
    _honest_is_rewarded(server)


def test_a_body_that_stops_coming_is_cut_and_nothing_is_judged(server: LiveServer):
    key = server.create_key("reward")
    before = _records(server)
    whole = _request(server, HONEST, key)
    with _connect(server) as sock:
        started = time.monotonic()
        sock.sendall(whole[:-10])  # all the headers, the body but its last 10 bytes
        reply = _read_until_closed(sock)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert BODY_S * 0.8 <= took < BODY_S + 5, took
    assert _records(server) == before
    _honest_is_rewarded(server)
    assert _records(server) == before + 1


def test_many_slow_connections_are_all_closed(server: LiveServer):
    socks = [_connect(server) for _ in range(300)]
    try:
        for sock in socks:
            sock.sendall(b"POST /v1/groups HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
        time.sleep(HEADER_S + 2)
        for sock in socks:
            sock.settimeout(10)
            assert _read_until_closed(sock).startswith(b"HTTP/1.1 408")
    finally:
        for sock in socks:
            sock.close()
    _honest_is_rewarded(server)


def test_honest_clients_are_not_cut(server: LiveServer):
    key = server.create_key("reward")
    whole = _request(server, HONEST, key)
    head, body = whole.split(b"\r\n\r\n", 1)
    with _connect(server) as sock:
        # Headers in three pieces, each well within the deadline; then the body.
        for piece in (head[:20], head[20:60], head[60:] + b"\r\n\r\n"):
            sock.sendall(piece)
            time.sleep(HEADER_S / 5)
        sock.sendall(body)
        first = _read_response(sock)
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
        assert b'"reward":1.0' in first
        # The same keep-alive connection, its next request a little later.
        time.sleep(HEADER_S / 2)
        sock.sendall(whole)
        second = _read_response(sock)
        assert second.startswith(b"HTTP/1.1 200"), second[:200]


def test_a_verification_longer_than_both_deadlines_is_answered(server: LiveServer):
    slow = "```python\nimport time\n\ndef add(a, b):\n    time.sleep(3.5)\n    return a + b\n```"
    task = {"entry_point": "add", "tests": "def check(candidate):\n    assert candidate(2, 2) == 4\n",
            "time_limit_s": 10}
    with server.client(server.create_key("reward")) as c:
        started = time.monotonic()
        reply = c.post("/v1/verify", json={"verifier": "code", "task": task, "response": slow})
        took = time.monotonic() - started
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["reward"] == 1.0, reply.text[:500]
    assert took > HEADER_S + BODY_S
