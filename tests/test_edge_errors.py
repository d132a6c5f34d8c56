"""The service's edge under bad and hidden input, through HTTP (the app in-process): a task found invalid
while verifying fails only its own group, a reused request_id with another body is a 409,
strings that are not Unicode are a 422, and no error carries hidden task data."""

from __future__ import annotations

import uuid

import httpx
import pytest

from service.testing.app import AppServer, app_settings

GOOD = {"verifier": "math", "task": {"answer": "2"}, "responses": [r"\boxed{2}", r"\boxed{3}"]}
# Parses as a task (a string), but the judge cannot parse it as mathematics; the command
# name is a marker that must never come back when the task is registered (hidden).
GOLD_MARKER = "qzxhiddengold"
BAD_GOLD = {"answer": "\\" + GOLD_MARKER + "{1}"}
ROW_MARKER = "QZX-hidden-row-5521"
# SQLite's json_extract quotes a bad path in its message: the instance's data.
SQL_TASK = {
    "dialect": "sqlite",
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT);",
    "instances": [f"INSERT INTO emp VALUES (1,'{ROW_MARKER}'),(2,'ann');"],
    "gold": "SELECT name FROM emp ORDER BY id",
}
LEAKY_SQL = "SELECT json_extract('{}', name) FROM emp"


@pytest.fixture(scope="module")
def client(app_server: AppServer):
    with app_server.client() as c:
        yield c


def _records(client: httpx.Client, group_id: str) -> list[dict]:
    return client.get("/v1/records", params={"group_id": group_id}).json()["records"]


def test_a_task_invalid_while_verifying_fails_only_its_group(client: httpx.Client):
    bad = {"verifier": "math", "task": BAD_GOLD, "responses": ["1", "2", "3"], "group_id": uuid.uuid4().hex}
    reply = client.post("/v1/groups", json={"groups": [GOOD, bad, GOOD]})
    assert reply.status_code == 200, reply.text
    groups = reply.json()["groups"]
    for good in (groups[0], groups[2]):
        assert good["error"] is None and [r["verdict"] for r in good["results"]] == ["correct", "incorrect"]
        assert good["rewards"] == [1.0, 0.0] and good["advantages"][0] > 0 > good["advantages"][1]
    failed = groups[1]
    assert failed["error"]["index"] == 1 and failed["error"]["field"] == "groups[1].task.answer"
    assert "cannot be parsed" in failed["error"]["message"]
    # Nothing is computed from a group in error, and nothing is logged for it.
    assert failed["results"] == [] and failed["rewards"] == [None] * 3 and failed["advantages"] == [None] * 3
    assert failed["mean"] is None and failed["std"] is None and failed["errors"] == 3
    assert _records(client, bad["group_id"]) == []
    for good in (groups[0], groups[2]):
        assert len(_records(client, good["group_id"])) == 2


def test_a_task_invalid_in_a_fanned_out_verifier_fails_only_its_group(client: httpx.Client):
    """The code verifier judges each response on its own thread: one invalid task must
    still come back as its group's error, not as an ExceptionGroup."""
    # `check` is defined (the task validates) but rebound to a non-callable: only running
    # the tests can tell.
    tests = "def check(candidate):\n    assert candidate() == 1\n\ncheck = 1\n"
    no_check = {"verifier": "code", "task": {"language": "python", "entry_point": "f", "tests": tests},
                "responses": ["```python\ndef f():\n    return 1\n```", "```python\ndef f():\n    return 2\n```"]}
    reply = client.post("/v1/groups", json={"groups": [no_check, GOOD]})
    assert reply.status_code == 200, reply.text
    failed, good = reply.json()["groups"]
    assert failed["error"]["index"] == 0 and failed["error"]["field"].startswith("groups[0].task")
    assert failed["results"] == [] and failed["rewards"] == [None, None]
    assert good["rewards"] == [1.0, 0.0]


def test_problems_found_before_verifying_reject_the_request_naming_the_group(client: httpx.Client):
    cases = [
        ({"verifier": "nope", "task": {"answer": "1"}, "responses": ["1"]}, 422, "groups[1].verifier"),
        ({"verifier": "math", "task": {"answer": 1, "bogus": 2}, "responses": ["1"]}, 422, "groups[1].task.bogus"),
        ({"verifier": "math", "task_id": "not-registered-" + uuid.uuid4().hex, "responses": ["1"]}, 404,
         "groups[1].task_id"),
    ]
    for group, status, field in cases:
        reply = client.post("/v1/groups", json={"groups": [GOOD, group]})
        assert reply.status_code == status and field in reply.json()["detail"], reply.text


def test_a_registered_task_found_invalid_names_the_field_but_not_its_content(client: httpx.Client):
    task_id = f"edge/bad-gold-{uuid.uuid4().hex[:8]}"
    assert client.post("/v1/tasks", json={"task_id": task_id, "verifier": "math", "task": BAD_GOLD}).status_code == 201
    reply = client.post("/v1/groups", json={"groups": [{"verifier": "math", "task_id": task_id,
                                                        "responses": ["1", "2"]}, GOOD]})
    assert reply.status_code == 200, reply.text
    failed = reply.json()["groups"][0]
    assert failed["error"]["field"] == "groups[0].task.answer" and task_id in failed["error"]["message"]
    single = client.post("/v1/verify", json={"verifier": "math", "task_id": task_id, "response": "1"})
    assert single.status_code == 422 and "task.answer" in single.json()["detail"]
    for text in (reply.text, single.text):
        assert GOLD_MARKER not in text
    # Inline, the caller sent the gold: the message may say what is wrong with it.
    inline = client.post("/v1/verify", json={"verifier": "math", "task": BAD_GOLD, "response": "1"})
    assert inline.status_code == 422 and GOLD_MARKER in inline.json()["detail"]


def test_reused_request_id_with_another_body_is_a_conflict(client: httpx.Client):
    request_id = f"edge-{uuid.uuid4().hex}"
    body = {"verifier": "math", "task": {"answer": "3"}, "response": r"\boxed{3}", "request_id": request_id}
    first = client.post("/v1/verify", json=body)
    assert first.status_code == 200
    again = client.post("/v1/verify", json=body)
    assert again.status_code == 200 and again.json()["record_id"] == first.json()["record_id"]
    for change, named in (({"response": r"\boxed{4}"}, "response"), ({"task": {"answer": "4"}}, "task")):
        conflict = client.post("/v1/verify", json={**body, **change})
        assert conflict.status_code == 409, conflict.text
        detail = conflict.json()["detail"]
        assert "request_id" in detail and named in detail and first.json()["record_id"] in detail
    # Every record of this task (other tests log some too), page by page.
    records: list[dict] = []
    params: dict = {"task_hash": first.json()["task_hash"], "limit": 500}
    while True:
        page = client.get("/v1/records", params=params).json()
        records += page["records"]
        if page["next_cursor"] is None:
            break
        params["after"] = page["next_cursor"]
    assert [r["request_id"] for r in records].count(request_id) == 1


@pytest.mark.parametrize("path, body, field", [
    ("/v1/verify", {"verifier": "math", "task": {"answer": "1"}, "response": "a\ud800b"}, "response"),
    ("/v1/verify", {"verifier": "math", "task": {"answer": "1"}, "response": "1", "request_id": "\udfff"},
     "request_id"),
    ("/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": "1"}, "responses": ["1", "\ud83d"]}]},
     "groups[0].responses[1]"),
    ("/v1/openrlhf", {"query": ["q\ud800"], "labels": ["1"]}, "query[0]"),
    ("/v1/tasks", {"task_id": "x", "verifier": "math", "task": {"answer": "\udc00"}}, "task.answer"),
])
def test_lone_surrogates_are_a_422_naming_the_field(client: httpx.Client, path: str, body: dict, field: str):
    import json

    # ensure_ascii writes the lone surrogate as the escape a hostile client would send.
    reply = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert reply.status_code == 422 and field in reply.json()["detail"], reply.text


@pytest.mark.parametrize("label, field", [
    ({"task_id": 5}, "task_id"), ({"task": "not an object"}, "task"), ({"verifier": 3, "task": {}}, "verifier"),
])
def test_openrlhf_labels_of_the_wrong_shape_are_a_422(client: httpx.Client, label: dict, field: str):
    reply = client.post("/v1/openrlhf", json={"query": ["q 1", "q 2"], "labels": ["1", label]})
    assert reply.status_code == 422 and "labels[1]" in reply.json()["detail"] and field in reply.json()["detail"]


def test_openrlhf_scores_an_invalid_task_as_an_error_and_the_rest_normally(client: httpx.Client):
    body = {"query": [r"\boxed{2}", r"\boxed{1}"], "labels": ["2", {"task": BAD_GOLD}]}
    reply = client.post("/v1/openrlhf", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["rewards"] == [1.0, 0.0] and reply.json()["extra_logs"]["error"] == [0.0, 1.0]
    strict = client.post("/v1/openrlhf", params={"error_policy": "raise"}, json=body)
    assert strict.status_code == 422 and "labels[1]" in strict.json()["detail"]


def test_sql_database_errors_on_hidden_instances_are_withheld(client: httpx.Client):
    task_id = f"edge/sql-{uuid.uuid4().hex[:8]}"
    assert client.post("/v1/tasks", json={"task_id": task_id, "verifier": "sql", "task": SQL_TASK}).status_code == 201
    hidden = client.post("/v1/verify", json={"verifier": "sql", "task_id": task_id, "response": LEAKY_SQL})
    assert hidden.status_code == 200 and hidden.json()["verdict"] == "incorrect"
    # A reward key gets the feedback: the failure, with the values the database quoted masked.
    entry = hidden.json()["evidence"]["instances"][0]
    assert entry["failure"] and "error" in entry and ROW_MARKER not in hidden.text
    # An audit key reads the full evidence, the database's own message included.
    record = client.get(f"/v1/records/{hidden.json()['record_id']}")
    assert ROW_MARKER in record.json()["evidence"]["instances"][0]["error"]
    # The same task inline: the caller holds the data, and the database's message helps.
    inline = client.post("/v1/verify", json={"verifier": "sql", "task": SQL_TASK, "response": LEAKY_SQL})
    assert ROW_MARKER in inline.json()["evidence"]["instances"][0]["error"]
    # An honest answer to the hidden task still gets its reward.
    honest = client.post("/v1/verify", json={"verifier": "sql", "task_id": task_id,
                                             "response": "SELECT name FROM emp ORDER BY id"})
    assert honest.json()["reward"] == 1.0


@pytest.mark.slow
def test_infrastructure_errors_say_what_failed_in_our_words(tmp_path):
    """A Postgres SQL task whose server is unreachable: verdict `error`, and neither the
    connection string's password nor the driver's message reaches the caller."""
    secret = "QZXpassword7731"
    server = AppServer(app_settings(tmp_path, sql_postgres_url=f"postgresql://assay:{secret}@127.0.0.1:9/x")).start()
    try:
        with server.client() as c:
            task = {**SQL_TASK, "dialect": "postgres"}
            reply = c.post("/v1/verify", json={"verifier": "sql", "task": task, "response": LEAKY_SQL})
            assert reply.status_code == 200 and reply.json()["verdict"] == "error", reply.text
            assert reply.json()["reward"] == 0.0 and reply.json()["evidence"]["error"] == "sandbox_error"
            record = c.get(f"/v1/records/{reply.json()['record_id']}")
            for text in (reply.text, record.text):
                assert secret not in text and "127.0.0.1:9" not in text and "connection" not in text.lower()
    finally:
        server.stop()
