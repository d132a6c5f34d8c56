"""What an operator reads: JSON log lines of a live server, and /metrics through prometheus_client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.metrics import Metrics
from service.testing.live import LiveServer

# A real server process: the JSON log lines `assay serve` writes.
pytestmark = pytest.mark.slow

README_GROUP = {"verifier": "math", "task": {"answer": "\\frac{1}{2}"},
                "responses": ["\\boxed{0.5}", "\\boxed{1/3}", "so $\\boxed{2/4}$", "no idea"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("observed"), env={"ASSAY_MAX_INFLIGHT_RESPONSES": "4"},
                      log_level="info")
    yield live
    live.stop()


def log_lines(server: LiveServer) -> list[dict]:
    text = server.log_path.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON log line: {line!r}")
    return parsed


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_one_json_line_per_request_and_per_verification_never_the_key(server: LiveServer):
    key = server.create_key("reward")
    secret = key.split("_", 2)[2]
    key_id = key.split("_", 2)[1]
    with server.client(key) as c:
        r = c.post("/v1/groups", json={"groups": [README_GROUP]}, headers={"X-Request-ID": "trace-42"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "trace-42"
        verdicts = {res["record_id"]: res["verdict"] for res in r.json()["groups"][0]["results"]}
    # The OpenRLHF adapter sends its key in the query string; it must not reach any log line.
    plain = httpx.post(f"{server.url}/v1/openrlhf", params={"api_key": key},
                       json={"query": ["\\boxed{2}"], "labels": ["2"]}, timeout=60)
    assert plain.status_code == 200, plain.text
    bad = httpx.get(f"{server.url}/v1/records", params={"api_key": key, "token": "t0ps3cret"},
                    headers={"Authorization": f"Bearer {key}x"}, timeout=60)
    assert bad.status_code == 401

    # The access line is written once the answer has been sent: wait for the last one.
    deadline = time.monotonic() + 10
    while not any(line.get("path") == "/v1/records" for line in log_lines(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    raw = server.log_path.read_text()
    assert secret not in raw and key not in raw and "t0ps3cret" not in raw
    lines = log_lines(server)
    requests = [line for line in lines if line.get("logger") == "assay.access"]
    groups = [line for line in requests if line["request_id"] == "trace-42"]
    assert len(groups) == 1
    assert groups[0] | {"duration_ms": 0} == groups[0] | {
        "route": "/v1/groups", "path": "/v1/groups", "method": "POST", "status": 200, "key_id": key_id,
        "duration_ms": 0}
    assert groups[0]["duration_ms"] > 0
    verified = [line for line in lines if line.get("logger") == "assay.verification"
                and line.get("request_id") == "trace-42"]
    assert {v["record_id"]: v["verdict"] for v in verified} == verdicts and len(verified) == 4
    assert {(v["key_id"], v["verifier"]) for v in verified} == {(key_id, "math")}
    assert all(v["duration_ms"] >= 0 and v["level"] == "INFO" for v in verified)
    openrlhf = [line for line in requests if line["path"] == "/v1/openrlhf"]
    assert len(openrlhf) == 1 and openrlhf[0]["key_id"] == key_id and openrlhf[0]["status"] == 200
    assert [line for line in requests if line["path"] == "/v1/records"][-1]["status"] == 401
    # uvicorn's own lines are JSON too (startup), and its access log is off (one line per request).
    assert any(line.get("logger", "").startswith("uvicorn") for line in lines)


# Holds its sandbox worker for a while, so that the in-flight budget is spent when the next request comes.
SLOW_GROUP = {"verifier": "code", "task": {"language": "python", "entry_point": "add",
                                           "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n"},
              "responses": ["```python\nimport time\ntime.sleep(4)\ndef add(a, b):\n    return a + b\n```"] * 4}


def test_metrics_exposition(server: LiveServer):
    import threading

    with server.client() as c:
        assert c.post("/v1/groups", json={"groups": [README_GROUP]}).status_code == 200
        # A request too big to ever fit is a 422 naming the limit, not a 503 to retry forever.
        too_big = c.post("/v1/groups", json={"groups": [README_GROUP | {"responses": ["1"] * 5}]})
        assert too_big.status_code == 422 and "max_inflight_responses" in too_big.json()["detail"]
        # Saturation: the budget (4) is held by a slow request, so the next one gets a 503.
        slow = threading.Thread(target=lambda: c.post("/v1/groups", json={"groups": [SLOW_GROUP]}))
        slow.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            inflight = samples(httpx.get(f"{server.url}/metrics", timeout=30).text).get(
                ("assay_inflight_responses", ()), 0)
            if inflight == 4:
                break
            time.sleep(0.05)
        saturated = c.post("/v1/groups", json={"groups": [README_GROUP]})
        slow.join()
        assert saturated.status_code == 503 and saturated.headers["retry-after"]
    page = httpx.get(f"{server.url}/metrics", timeout=30)
    assert page.headers["content-type"].startswith("text/plain")
    found = samples(page.text)
    assert found[("assay_verifications_total", (("verdict", "correct"), ("verifier", "math")))] >= 2
    assert found[("assay_verification_seconds_count", (("verifier", "math"),))] >= 4
    assert ("assay_verification_seconds_bucket", (("le", "+Inf"), ("verifier", "math"))) in found
    assert found[("assay_unavailable_total", (("reason", "saturated"),))] >= 1
    assert found[("assay_http_requests_total", (("route", "/v1/groups"), ("status", "503")))] >= 1
    assert ("assay_inflight_responses", ()) in found
    assert found[("process_cpu_seconds_total", ())] > 0
    assert found[("process_resident_memory_bytes", ())] > 0
    pools = {labels: value for (name, labels), value in found.items() if name == "assay_sandbox_workers"}
    assert pools and {dict(labels)["state"] for labels in pools} == {"size", "idle", "in_use"}


def test_error_causes_and_hostile_label_values_round_trip():
    metrics = Metrics()
    metrics.verification("code", "error", 0.5, [], {"error_cause": "sandbox_crash", "error": "sandbox_error"})
    metrics.verification("code", "error", 0.5, [], {"error": "verifier_error"})
    metrics.verification("code", "error", 0.5, [], {"error_cause": 'x"} 1\nfake_metric 9'})
    hostile = 'flag"with\\quotes\nand newline'
    metrics.verification("sql", "incorrect", 0.1, [hostile, hostile], {})
    found = samples(metrics.render().decode())
    errors = {(dict(labels)["kind"], dict(labels)["cause"]): value for (name, labels), value in found.items()
              if name == "assay_errors_total" and dict(labels)["verifier"] == "code"}
    assert errors == {("sandbox_error", "sandbox_crash"): 1, ("verifier_error", "verifier_error"): 1,
                      ("unknown", "other"): 1}
    # A name that is not a flag name is never a label (issue 30): it is counted as `other`.
    assert found[("assay_flags_total", (("flag", "other"), ("verifier", "sql")))] == 1
    assert not any(dict(labels).get("flag") == hostile for _, labels in found)
    assert not any(name == "fake_metric" for name, _ in found)


def test_metrics_are_per_instance(tmp_path: Path):
    first, second = Metrics(), Metrics()
    first.verification("math", "correct", 0.01, [], {})
    assert ("assay_verifications_total", (("verdict", "correct"), ("verifier", "math"))) not in samples(
        second.render().decode())
