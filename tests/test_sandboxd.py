"""The sandbox runner (`sandboxd`) and the `remote` backend, through their public interfaces.

A real `python -m sandboxes.sandboxd` subprocess on the process backend, reached through
its unix socket: the wire protocol (authentication both ways, the narrow set of
operations, the limits ceiling) and the service running every verification through it
(`ASSAY_SANDBOX=remote`). The verifier suites also run on it with
`ASSAY_TEST_BACKENDS=remote` (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandboxes.base import Job, Limits, SandboxError, SandboxUnavailable
from sandboxes.remote import Address, RemoteSandbox, challenge, mac, recv_frame, send_frame
from tests.conftest import REPO, LiveServer
from tests.sandboxd_support import Sandboxd
from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get

ADD_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
HONEST_ADD = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandboxd]:
    started = Sandboxd(tmp_path_factory.mktemp("sandboxd"))
    yield started
    started.stop()


def raw(runner: Sandboxd, op: Any, secret: bytes | None = None) -> tuple[socket.socket, dict[str, Any]]:
    """Speak the wire protocol by hand: authenticate (with `secret`) and send `op`."""
    address = Address.parse(runner.url)
    sock = socket.socket(address.family, socket.SOCK_STREAM)
    sock.connect(address.target)
    hello = recv_frame(sock, 10)
    ours = challenge()
    send_frame(sock, {"t": "auth", "challenge": ours, "op": op,
                      "mac": mac(secret or runner.secret, "client", hello["challenge"], ours)})
    return sock, recv_frame(sock, 10)


def honest_run(box: RemoteSandbox) -> None:
    result = box.run(Job(command=["python3", "-c", "print(6 * 7)"], limits=Limits(wall_s=10)))
    assert (result.exit_code, result.stdout) == (0, b"42\n")


# ------------------------------------------------------------------------ the wire


def test_runner_refuses_a_client_without_the_secret(runner: Sandboxd):
    with pytest.raises(SandboxUnavailable) as refused:
        RemoteSandbox(runner.url, b"0" * 64)
    assert refused.value.cause == "sandboxd_refused"
    # By hand, a wrong proof and no proof at all: refused before any operation runs.
    marker = Path(runner.secret_file.parent / "ran")
    op = {"op": "run", "command": ["touch", str(marker)], "limits": {"wall_s": 5}}
    sock, reply = raw(runner, op, secret=b"1" * 64)
    sock.close()
    assert reply == {"t": "refused", "reason": "authentication failed"}
    address = Address.parse(runner.url)
    with socket.socket(address.family, socket.SOCK_STREAM) as sock:
        sock.connect(address.target)
        recv_frame(sock, 10)
        send_frame(sock, {"t": "auth", "op": op})
        assert recv_frame(sock, 10)["t"] == "refused"
    assert not marker.exists()
    assert "did not prove the deployment secret" in runner.log()
    honest_run(runner.client)


def test_client_refuses_a_runner_that_cannot_prove_the_secret(tmp_path: Path):
    """A stranger posing as the runner cannot hand the API a forged result."""
    path = tmp_path / "impostor.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    forged = {"exit_code": 0, "stdout": "", "stderr": "", "returned": True, "value": {"passed": True}}

    def impostor() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(SandboxError):  # the client hangs up on the forged proof
            send_frame(conn, {"t": "hello", "v": 1, "challenge": challenge()})
            recv_frame(conn, 10)
            send_frame(conn, {"t": "ok", "mac": "0" * 64})
            send_frame(conn, {"t": "result", "describe": {"backend": "docker"}, "result": forged})

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    with pytest.raises(SandboxUnavailable) as refused:
        RemoteSandbox(f"unix://{path}", b"s" * 64)
    assert refused.value.cause == "sandboxd_unauthenticated"
    listener.close()


@pytest.mark.parametrize("op, reason", [
    # Nothing in a request can choose the container's walls.
    ({"op": "run", "command": ["id"], "limits": {"wall_s": 5}, "image": "alpine"}, "unexpected fields"),
    ({"op": "run", "command": ["id"], "limits": {"wall_s": 5}, "privileged": True,
      "binds": ["/:/host"], "network_mode": "host", "runtime": "runc"}, "unexpected fields"),
    ({"op": "exec_in_container", "command": ["id"]}, "op must be one of"),
    ({"op": "call", "target": "os:system", "payload": "id", "limits": {"wall_s": 5}}, "target must be"),
    ({"op": "call", "target": "service.config:Settings", "payload": None, "limits": {"wall_s": 5}}, "target must be"),
    ({"op": "open", "target": "verifiers.math.inside.check:serve", "payload": None,
      "limits": {"wall_s": 5, "uid": 0}}, "limits must be"),
    ({"op": "run", "command": ["id"], "limits": {"wall_s": 86400}}, "limits.wall_s"),
    ({"op": "run", "command": ["id"], "limits": {"memory_mb": 1 << 20}}, "limits.memory_mb"),
    ({"op": "warm", "pool": "../../etc", "preload": []}, "pool must be"),
])
def test_runner_serves_only_the_narrow_interface(runner: Sandboxd, op: dict, reason: str):
    sock, reply = raw(runner, op)
    if reply["t"] == "ok":  # checked once the operation's fields are read
        reply = recv_frame(sock, 10)
        assert reply["t"] == "error" and reply["cause"] == "sandboxd_refused"
        assert reason in reply["message"]
    else:
        assert reply["t"] == "refused" and reason in reply["reason"], reply
    sock.close()
    honest_run(runner.client)


def test_remote_backend_keeps_the_interface(runner: Sandboxd):
    box = runner.client
    result = box.run(Job(command=["sh", "-c", "cat in.txt; cat; echo err >&2; exit 3"], files={"in.txt": b"file\n"},
                         stdin=b"stdin\n", limits=Limits(wall_s=10)))
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"file\nstdin\n", b"err\n")
    slow = box.run(Job(command=["sleep", "30"], limits=Limits(wall_s=0.5)))
    assert slow.killed_by == "timeout"
    # A call session (what resident servers are): requests, then finish.
    session = box.open("verifiers.math.inside.check:serve", None, Limits(wall_s=30), pool="remote-probe",
                       preload=("verifiers.math.inside.check",))
    assert session.request({"answer": "1/2", "gold": "0.5"})["equal"] is True
    assert session.request({"answer": "3", "gold": "0.5"})["equal"] is False
    assert session.finish().returned
    assert box.pool_stats()["remote-probe"]["size"] == 2
    assert box.describe()["via"] == "sandboxd" and box.name == "process"


def test_code_verifier_relays_through_the_runner(runner: Sandboxd):
    """The code verifier's grader and candidate talk only through the caller: every
    relayed message crosses the runner. Hostile answers first, then the honest one."""
    code = get("code")
    ctx = VerifyContext(sandbox=runner.client)
    task = code.parse_task({"entry_point": "add", "tests": ADD_TESTS})
    hostile = [
        "```python\nimport sys\ndef add(a, b):\n    sys.exit(0)\n```",
        "```python\nclass Eq:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Eq()\n```",
        # The runner's socket is on the host: candidate code cannot see it.
        "```python\nimport socket\ns = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({Address.parse(runner.url).target!r})\ndef add(a, b):\n    return a + b\n```",
    ]
    for response in hostile:
        outcome = code.verify(task, response, ctx)
        assert outcome.verdict not in (Verdict.correct, Verdict.error), (response, outcome.verdict)
        assert outcome.reward(task) == 0.0
    outcome = code.verify(task, HONEST_ADD, ctx)
    assert (outcome.verdict, outcome.reward(task)) == (Verdict.correct, 1.0)


def test_runner_module_never_imports_the_service():
    """sandboxd holds no database URL or key: it cannot even import the code that would."""
    probe = ("import sys, sandboxes.sandboxd, sandboxes.remote; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'service'))")
    out = subprocess.run([sys.executable, "-I", "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------- through the service


@pytest.mark.slow
def test_service_verifies_through_the_runner_and_answers_503_without_it(tmp_path: Path):
    runner = Sandboxd(tmp_path / "runner")
    server = LiveServer(tmp_path, env={"ASSAY_SANDBOX": "remote", "ASSAY_SANDBOXD_URL": runner.url,
                                       "ASSAY_SANDBOXD_SECRET_FILE": str(runner.secret_file)})
    group = {"verifier": "code", "task": {"entry_point": "add", "tests": ADD_TESTS},
             "responses": ["```python\nimport os\ndef add(a, b):\n    os._exit(0)\n```", HONEST_ADD]}
    try:
        with server.client() as c:
            ready = c.get("/readyz").json()
            assert ready["sandbox"]["via"] == "sandboxd" and ready["sandbox"]["backend"] == "process"
            r = c.post("/v1/groups", json={"groups": [group]})
            assert r.status_code == 200, r.text
            assert r.json()["groups"][0]["rewards"] == [0.0, 1.0]
            runner.stop()
            # The runner is gone: nothing was judged, so the caller is told to retry.
            r = c.post("/v1/groups", json={"groups": [group]})
            assert r.status_code == 503 and "Retry-After" in r.headers, r.text
            runner = Sandboxd(tmp_path / "runner")
            r = c.post("/v1/groups", json={"groups": [group]})
            assert r.status_code == 200 and r.json()["groups"][0]["rewards"] == [0.0, 1.0], r.text
    finally:
        server.stop()
        runner.stop()
