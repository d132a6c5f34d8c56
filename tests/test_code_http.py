"""The `code` verifier through the HTTP API (the real app, in-process): the issue's request shapes, and
hidden test content that no endpoint, error message, record or log line gives away."""

from __future__ import annotations

import json

import pytest

# Markers planted in every hidden part of the tasks: test source, an assertion message,
# a hidden case's input and its expected output.
HIDDEN_SOURCE = "QZX-hidden-source-5521"
HIDDEN_MESSAGE = "QZX-hidden-message-7730"
HIDDEN_STDIN = "QZX-hidden-stdin-1184"
HIDDEN_STDOUT = "QZX-hidden-stdout-9046"
MARKERS = (HIDDEN_SOURCE, HIDDEN_MESSAGE, HIDDEN_STDIN, HIDDEN_STDOUT)

ASSERT_TASK = {
    "language": "python",
    "entry_point": "add",
    "tests": f"# {HIDDEN_SOURCE}\ndef check(candidate):\n    assert candidate(2, 3) == 5, '{HIDDEN_MESSAGE}'\n",
    "visible_tests": "def check(candidate):\n    assert candidate(1, 1) == 2\n",
    "time_limit_s": 2.0,
}
IO_TASK = {
    "language": "python",
    "io_cases": [{"stdin": f"{HIDDEN_STDIN}\n", "stdout": f"{HIDDEN_STDOUT}\n"}],
    "time_limit_s": 2.0,
}
HONEST_ADD = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG_ADD = "```python\ndef add(a, b):\n    return a * b + 1\n```"
# Tries every way to make the service echo a hidden input: exception text, stderr, stdout.
ECHO_ADD = ("```python\nimport sys\ndef add(a, b):\n    sys.stderr.write(repr((a, b)))\n"
            "    raise ValueError(repr((a, b)))\n```")
ECHO_IO = ("```python\nimport sys\ndata = sys.stdin.read()\nsys.stderr.write(data)\nprint(data)\n"
           "raise ValueError(data)\n```")


def assert_clean(text: str, where: str) -> None:
    for marker in MARKERS:
        assert marker not in text, f"{where} leaked {marker}"


@pytest.fixture(scope="module")
def client(app_server):
    with app_server.client() as c:
        yield c


def test_issue_request_shapes_work_as_written(client):
    first = client.post("/v1/verify", json={
        "verifier": "code",
        "task": {"language": "python", "entry_point": "add",
                 "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n"},
        "response": "```python\ndef add(a, b):\n    return a + b\n```"})
    assert first.status_code == 200, first.text
    assert (first.json()["reward"], first.json()["verdict"]) == (1.0, "correct")
    second = client.post("/v1/verify", json={
        "verifier": "code",
        "task": {"language": "python", "io_cases": [{"stdin": "1 2\n", "stdout": "3\n"}]},
        "response": "```python\na, b = map(int, input().split())\nprint(a + b)\n```"})
    assert second.status_code == 200, second.text
    assert (second.json()["reward"], second.json()["verdict"]) == (1.0, "correct")
    body = second.json()
    assert set(body["components"]) >= {"format", "correctness", "compliance", "resources"}


def test_hidden_tests_cannot_be_obtained_through_any_endpoint(client, app_server):
    seen: list[tuple[str, str]] = []

    def call(method: str, url: str, **kwargs):
        response = client.request(method, url, **kwargs)
        # A 5xx page would hold nothing to leak and so pass the checks below: never accepted.
        assert response.status_code < 500, (method, url, response.status_code)
        seen.append((f"{method} {url} -> {response.status_code}", response.text))
        return response

    def read(method: str, url: str, **kwargs):
        response = call(method, url, **kwargs)
        assert response.status_code == 200, (method, url, response.status_code)
        assert response.content, (method, url)  # an empty body would pass vacuously too
        return response

    for task_id, task in (("code-http/assert-1", ASSERT_TASK), ("code-http/io-1", IO_TASK)):
        created = call("POST", "/v1/tasks", json={"task_id": task_id, "verifier": "code", "task": task})
        assert created.status_code in (200, 201), created.text
        public = created.json()["task"]
        hidden_key = "tests" if "tests" in task else "io_cases"
        assert set(public[hidden_key]) == {"hmac_sha256"}
        # Same id, different hidden content: a conflict whose message must not quote either.
        changed = json.loads(json.dumps(task).replace("QZX-hidden", "QZX-changed"))
        conflict = call("POST", "/v1/tasks", json={"task_id": task_id, "verifier": "code", "task": changed})
        assert conflict.status_code == 409, conflict.text
        read("GET", f"/v1/tasks/{task_id}")

    outcomes = {}
    for name, response in (("honest", HONEST_ADD), ("wrong", WRONG_ADD), ("echo", ECHO_ADD)):
        result = call("POST", "/v1/verify", json={"verifier": "code", "task_id": "code-http/assert-1",
                                                  "response": response})
        assert result.status_code == 200, result.text
        outcomes[name] = result.json()
    assert outcomes["honest"]["reward"] == 1.0
    assert outcomes["wrong"]["reward"] == 0.0 and outcomes["echo"]["reward"] == 0.0
    # A reward key gets the feedback: how many hidden tests passed, nothing of the test itself.
    assert outcomes["wrong"]["evidence"] == outcomes["wrong"]["feedback"]
    assert (outcomes["wrong"]["feedback"]["hidden_passed"], outcomes["wrong"]["feedback"]["hidden_total"]) == (0, 1)
    failed = call("GET", f"/v1/records/{outcomes['wrong']['record_id']}").json()["evidence"]["tests"][-1]
    assert failed["type"] == "AssertionError" and "withheld" in failed["message"]

    io = call("POST", "/v1/verify", json={"verifier": "code", "task_id": "code-http/io-1", "response": ECHO_IO})
    assert io.status_code == 200 and io.json()["reward"] == 0.0

    groups = call("POST", "/v1/groups", json={"groups": [
        {"verifier": "code", "task_id": "code-http/assert-1", "responses": [HONEST_ADD, WRONG_ADD, ECHO_ADD]},
        {"verifier": "code", "task_id": "code-http/io-1", "responses": [ECHO_IO, "```python\nprint('x')\n```"]},
        {"verifier": "code", "task": ASSERT_TASK, "responses": [HONEST_ADD, ECHO_ADD]},
    ]})
    assert groups.status_code == 200, groups.text
    assert groups.json()["groups"][0]["rewards"] == [1.0, 0.0, 0.0]

    # A malformed inline task whose broken test source holds a marker: the 422 must not echo it.
    broken = {**ASSERT_TASK, "tests": f"def check(candidate):\n    x = '{HIDDEN_SOURCE}\n"}
    invalid = call("POST", "/v1/verify", json={"verifier": "code", "task": broken, "response": HONEST_ADD})
    assert invalid.status_code == 422, invalid.text

    records = call("GET", "/v1/records", params={"verifier": "code", "limit": 1000})
    assert records.status_code == 200
    rows = records.json()["records"]
    assert len(rows) >= 10
    for row in rows[:5]:
        read("GET", f"/v1/records/{row['id']}")
    read("POST", f"/v1/records/{outcomes['wrong']['record_id']}/replay")
    read("GET", "/v1/records/export", params={"verifier": "code"})
    read("GET", "/v1/verifiers")
    read("GET", "/metrics")

    for where, text in seen:
        assert_clean(text, where)
    assert_clean(app_server.log_path.read_text(errors="replace"), "server log")


def test_suspected_hacks_are_listed_by_flag(client):
    exploit = "```python\nimport os\ndef add(a, b):\n    os._exit(0)\n```"
    result = client.post("/v1/verify", json={"verifier": "code", "task": ASSERT_TASK, "response": exploit})
    assert result.status_code == 200 and result.json()["reward"] == 0.0
    assert "runtime:exit_during_test" in result.json()["flags"]
    listed = client.get("/v1/records", params={"flag": "runtime:exit_during_test"})
    assert listed.status_code == 200
    assert result.json()["record_id"] in {r["id"] for r in listed.json()["records"]}
