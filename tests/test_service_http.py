"""The reward API end to end: the app in-process (a real uvicorn server where a test restarts it),
real sandbox, real SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from service.testing.app import AppServer, app_settings
from service.testing.cli import run_cli
from tests.conftest import REPO, LiveServer

GROUP = {
    "verifier": "math",
    "task": {"answer": "\\frac{1}{2}"},
    "responses": [r"\boxed{1/2}", r"\boxed{0.5}", r"\boxed{1/3}", "no idea", r"\boxed{2/4}", r"\boxed{-1/2}",
                  r"The answer is $\frac{1}{2}$", r"\boxed{\frac{1}{2}}"],
}
HOSTILE = [
    r"\boxed{9^{9^{9^9}}}",
    r"\boxed{__import__('os').system('touch /tmp/assay-pwned')}",
    r"\boxed{(10^8)!}",
    r"\boxed{2^{2^{30}}}",
    r"\boxed{open('/tmp/assay-pwned','w').write('x')}",
    r"\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
    r"\boxed{10^{10^{10}}}",
    r"\boxed{\frac{1}{0}}",
]


def test_group_of_eight_returns_rewards_advantages_and_records(app_server: AppServer):
    with app_server.client() as c:
        r = c.post("/v1/groups", json={"groups": [GROUP]})
        assert r.status_code == 200, r.text
        group = r.json()["groups"][0]
        assert group["rewards"] == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
        # "no idea" names no value: invalid_format (docs/math_verifier.md), still reward 0.
        assert [res["verdict"] for res in group["results"]][:4] == ["correct", "correct", "incorrect",
                                                                    "invalid_format"]
        mean = 5 / 8
        assert group["mean"] == pytest.approx(mean)
        assert group["advantages"][0] == pytest.approx((1 - mean) / (group["std"] + 1e-4))
        assert group["zero_variance"] is False and group["errors"] == 0
        for result in group["results"]:
            record = c.get(f"/v1/records/{result['record_id']}").json()
            assert record["verdict"] == result["verdict"] and record["group_id"] == group["group_id"]
            assert record["response_hash"] and record["task_hash"] == result["task_hash"]
            assert record["sandbox_backend"] == "process"
        export = c.get("/v1/records/export", params={"group_id": group["group_id"]})
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert [line["id"] for line in lines] == [res["record_id"] for res in group["results"]]
        replay = c.post(f"/v1/records/{group['results'][2]['record_id']}/replay").json()
        assert replay["same_verdict"] is True and replay["replayed_verdict"] == "incorrect"


def test_advantage_options_and_zero_variance(app_server: AppServer):
    with app_server.client() as c:
        same = {"verifier": "math", "task": {"answer": "1"}, "responses": [r"\boxed{1}"] * 4}
        one = {"verifier": "math", "task": {"answer": "1"}, "responses": [r"\boxed{1}", "0", "0", "0"]}
        r = c.post("/v1/groups", json={"groups": [same, one], "advantage": {"scale": "none"}}).json()
        assert r["groups"][0]["zero_variance"] is True and r["groups"][0]["advantages"] == [0.0] * 4
        assert r["groups"][1]["advantages"] == pytest.approx([0.75, -0.25, -0.25, -0.25])
        r = c.post("/v1/groups", json={"groups": [one]}).json()
        assert r["groups"][0]["advantages"] == pytest.approx([1.4997, -0.4999, -0.4999, -0.4999], abs=1e-4)


def test_hostile_math_answers_never_execute_and_service_stays_up(app_server: AppServer):
    marker = Path("/tmp/assay-pwned")
    marker.unlink(missing_ok=True)
    started = time.monotonic()
    with app_server.client() as c:
        r = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "1"},
                                                    "responses": HOSTILE}]})
        assert r.status_code == 200, r.text
        group = r.json()["groups"][0]
        assert group["rewards"] == [0.0] * len(HOSTILE)
        assert {res["verdict"] for res in group["results"]} <= {"invalid_format", "incorrect", "timeout"}
        assert c.get("/healthz").status_code == 200
        ok = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "1"}, "response": r"\boxed{1}"})
        assert ok.json()["verdict"] == "correct"
    assert time.monotonic() - started < 60
    assert not marker.exists()


def test_hostile_answer_is_bounded_by_its_time_limit(app_server: AppServer):
    # A comparison sympy cannot finish quickly: the per-answer budget ends it.
    answer = r"\boxed{" + "+".join(f"\\sin(x^{{{i}}})^{{{i}}}" for i in range(2, 40)) + "}"
    with app_server.client() as c:
        started = time.monotonic()
        r = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "x", "timeout_s": 1},
                                       "response": answer})
        assert r.status_code == 200
        assert r.json()["reward"] == 0.0
        assert time.monotonic() - started < 15


def test_auth_missing_wrong_and_insufficient_scope(app_server: AppServer):
    body = {"verifier": "math", "task": {"answer": "1"}, "response": "1"}
    with app_server.anonymous() as anonymous:
        assert anonymous.post("/v1/verify", json=body).status_code == 401
        wrong = {"Authorization": "Bearer ak_nope_nope"}
        assert anonymous.post("/v1/verify", json=body, headers=wrong).status_code == 401
    audit_only = app_server.create_key("audit")
    with app_server.client(audit_only) as c:
        r = c.post("/v1/verify", json=body)
        assert r.status_code == 403 and "reward" in r.json()["detail"]
        assert c.get("/v1/records").status_code == 200
    reward_only = app_server.create_key("reward")
    with app_server.client(reward_only) as c:
        assert c.get("/v1/records").status_code == 403
        task = {"task_id": "t", "verifier": "math", "task": {"answer": "1"}}
        assert c.post("/v1/tasks", json=task).status_code == 403


@pytest.mark.parametrize(("body", "field"), [
    ({"verifier": "math", "task": {"answr": "1"}, "response": "1"}, "task.answr"),
    ({"verifier": "math", "task": {"answer": "1"}}, "response"),
    ({"verifier": "nope", "task": {"answer": "1"}, "response": "1"}, "nope"),
    ({"verifier": "math", "response": "1"}, "task"),
    ({"verifier": "math", "task": {"answer": "1"}, "task_id": "x", "response": "1"}, "task"),
    ({"verifier": "math", "task": {"answer": "1", "timeout_s": -1}, "response": "1"}, "task.timeout_s"),
])
def test_bad_input_gets_a_4xx_naming_the_field(app_server: AppServer, body, field):
    with app_server.client() as c:
        r = c.post("/v1/verify", json=body)
        assert r.status_code == 422
        assert field in r.json()["detail"]


def test_limits_on_body_group_and_response(app_server: AppServer):
    with app_server.client() as c:
        big = c.post("/v1/verify", content=b"x" * (9 * 1024 * 1024), headers={"Content-Type": "application/json"})
        assert big.status_code == 413
        too_many = {"groups": [{"verifier": "math", "task": {"answer": "1"}, "responses": ["1"] * 65}]}
        r = c.post("/v1/groups", json=too_many)
        assert r.status_code == 422 and "groups[0].responses" in r.json()["detail"]
        long = {"verifier": "math", "task": {"answer": "1"}, "response": "1" * 100_001}
        r = c.post("/v1/verify", json=long)
        assert r.status_code == 422 and "response" in r.json()["detail"]
        assert c.get("/v1/records/doesnotexist").status_code == 404


def test_retries_do_not_double_log(app_server: AppServer):
    with app_server.client() as c:
        body = {"verifier": "math", "task": {"answer": "3"}, "response": "3", "request_id": "retry-me-1"}
        first, second = c.post("/v1/verify", json=body).json(), c.post("/v1/verify", json=body).json()
        assert first["record_id"] == second["record_id"]
        groups = {"groups": [{"verifier": "math", "task": {"answer": "2"}, "responses": ["2", "3"]}]}
        headers = {"Idempotency-Key": "batch-42"}
        a = c.post("/v1/groups", json=groups, headers=headers).json()
        b = c.post("/v1/groups", json=groups, headers=headers).json()
        assert a == b
        group_id = a["groups"][0]["group_id"]
        assert len(c.get("/v1/records", params={"group_id": group_id}).json()["records"]) == 2
        other = {"groups": [{"verifier": "math", "task": {"answer": "2"}, "responses": ["5"]}]}
        assert c.post("/v1/groups", json=other, headers=headers).status_code == 422


def test_registered_tasks_by_id(app_server: AppServer):
    with app_server.client() as c:
        reg = {"task_id": "algebra/1", "verifier": "math", "task": {"answer": "x+1"}}
        assert c.post("/v1/tasks", json=reg).status_code == 201
        assert c.post("/v1/tasks", json=reg).json()["created"] is False
        conflict = {**reg, "task": {"answer": "x+2"}}
        assert c.post("/v1/tasks", json=conflict).status_code == 409
        r = c.post("/v1/verify", json={"verifier": "math", "task_id": "algebra/1", "response": r"\boxed{1+x}"})
        assert r.json()["verdict"] == "correct" and r.json()["task_id"] == "algebra/1"
        assert c.post("/v1/verify", json={"verifier": "math", "task_id": "missing", "response": "1"}).status_code == 404
        listed = c.get("/v1/records", params={"task_id": "algebra/1"}).json()["records"]
        assert listed and listed[0]["task_id"] == "algebra/1"


def test_records_filter_and_paginate(app_server: AppServer):
    with app_server.client() as c:
        c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "9"},
                                               "responses": ["9", "8", "7", "9"]}]})
        page = c.get("/v1/records", params={"verdict": "incorrect", "limit": 1}).json()
        assert len(page["records"]) == 1 and page["next_cursor"] is not None
        nxt = c.get("/v1/records", params={"verdict": "incorrect", "limit": 1, "after": page["next_cursor"]}).json()
        assert nxt["records"][0]["seq"] > page["records"][0]["seq"]
        assert all(r["verdict"] == "incorrect" for r in nxt["records"])
        assert c.get("/v1/records", params={"verdict": "bogus"}).status_code == 422


def wait_for_inflight(server: AppServer | LiveServer, n: int, timeout_s: float = 60.0) -> None:
    """Until the server's in-flight gauge reads at least n (the slow group was admitted)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with server.client() as c:
            text = c.get("/metrics", timeout=5).text
        values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith("assay_inflight_responses ")]
        if values and values[0] >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"the server never had {n} responses in flight")


@pytest.mark.slow
def test_saturation_gets_503_with_retry_after(tmp_path):
    server = AppServer(app_settings(tmp_path, max_inflight_responses=4)).start()
    try:
        # Four code responses that sleep in the sandbox until their time limit: in flight for seconds.
        slow = {"verifier": "code",
                "task": {"entry_point": "f", "tests": "def check(candidate):\n    assert candidate() == 1\n",
                         "time_limit_s": 4.0},
                "responses": ["```python\nimport time\ndef f():\n    time.sleep(30)\n```"] * 4}
        results: list[int] = []

        def occupy() -> None:
            with server.client() as c:
                results.append(c.post("/v1/groups", json={"groups": [slow]}).status_code)

        thread = threading.Thread(target=occupy)
        thread.start()
        wait_for_inflight(server, 4)
        with server.client() as c:
            r = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "1"}, "response": "1"})
        thread.join()
        assert r.status_code == 503 and r.headers["Retry-After"]
        assert results == [200]
    finally:
        server.stop()


@pytest.mark.slow
def test_records_survive_restart_and_keys_work_while_running(fresh_server: LiveServer):
    with fresh_server.client() as c:
        record_id = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "4"},
                                               "response": r"\boxed{4}"}).json()["record_id"]
    key = fresh_server.create_key("audit")  # the server is running on the same database
    fresh_server.restart()
    with fresh_server.client(key) as c:
        record = c.get(f"/v1/records/{record_id}")
        assert record.status_code == 200 and record.json()["verdict"] == "correct"


def test_health_ready_metrics_openapi(client):
    """Through the `client` fixture: starlette's TestClient itself, entered (lifespan ran)."""
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["status"] == "ready"
    client.post("/v1/verify", json={"verifier": "math", "task": {"answer": "1"}, "response": "1"})
    metrics = client.get("/metrics").text
    assert 'assay_verifications_total{verdict="correct",verifier="math"}' in metrics
    spec = client.get("/openapi.json").json()
    for path in ("/v1/verify", "/v1/groups", "/v1/records", "/v1/records/{record_id}", "/v1/records/export",
                 "/v1/verifiers", "/v1/tasks", "/healthz", "/metrics"):
        assert path in spec["paths"], path
    verifiers = {v["name"]: v for v in client.get("/v1/verifiers").json()}
    assert "answer" in verifiers["math"]["task_schema"]["properties"]


@pytest.mark.slow
def test_cli_audit_replay_and_local_verify(fresh_app: AppServer):
    env = {**os.environ, "ASSAY_DATABASE_URL": fresh_app.db_url, "ASSAY_SANDBOX_WORKERS": "2"}
    with fresh_app.client() as c:
        record_id = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "2"},
                                               "response": r"\boxed{3}"}).json()["record_id"]

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=REPO, input=stdin,
                              capture_output=True, text=True, timeout=120)

    # The read-only audit commands in this process (service/testing/cli.py); the others as an operator runs them.
    listed = run_cli(["audit", "list", "--verdict", "incorrect"], env)
    assert record_id in listed.stdout
    shown = json.loads(run_cli(["audit", "show", record_id], env).stdout)
    assert shown["verdict"] == "incorrect"
    exported = [json.loads(line) for line in run_cli(["audit", "export"], env).stdout.splitlines()]
    assert record_id in {r["id"] for r in exported}
    replay = cli("replay", record_id)
    assert replay.returncode == 0 and json.loads(replay.stdout)["same_verdict"] is True
    local = cli("verify", stdin=json.dumps({"verifier": "math", "task": {"answer": "1/2"}, "response": r"\boxed{.5}"}))
    assert json.loads(local.stdout.splitlines()[0])["verdict"] == "correct"
    bad = cli("keys", "create", "--scopes", "root")
    assert bad.returncode == 2 and "scopes" in bad.stderr
