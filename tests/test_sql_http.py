"""The `sql` verifier through the HTTP API (the real app, in-process): the issue's request shape, groups,
task errors as client errors, and hidden gold content that no endpoint, record or log
line gives away."""

from __future__ import annotations

import uuid

import pytest

GOLD_MARKER = "QZX-gold-comment-4417"
ROW_MARKER = "QZX-gold-row-9032"

ISSUE_REQUEST = {
    "verifier": "sql",
    "task": {"dialect": "sqlite",
             "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL);",
             "instances": ["INSERT INTO emp VALUES (1,'ann','ops',10.0),(2,'bob','dev',20.0);",
                           "INSERT INTO emp VALUES (1,'cid','dev',5.0);"],
             "gold": "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name"},
    "response": "```sql\nSELECT name FROM emp WHERE dept = 'dev' ORDER BY name\n```",
}
HIDDEN_TASK = {
    "dialect": "sqlite",
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL);",
    "instances": [f"INSERT INTO emp VALUES (1,'ann','ops',10.0),(2,'{ROW_MARKER}','dev',20.0);",
                  "INSERT INTO emp VALUES (1,'cid','dev',5.0),(2,'dot','ops',6.0);"],
    "gold": f"SELECT name FROM emp WHERE dept = 'dev' /* {GOLD_MARKER} */",
}


@pytest.fixture(scope="module")
def client(app_server):
    with app_server.client() as c:
        yield c


def test_issue_request_shape_works_as_written(client):
    reply = client.post("/v1/verify", json=ISSUE_REQUEST)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["verifier"], body["reward"], body["verdict"]) == ("sql", 1.0, "correct")
    assert {k: v["value"] for k, v in body["components"].items()} == {"format": 1.0, "compliance": 1.0,
                                                                      "correctness": 1.0}
    record = client.get(f"/v1/records/{body['record_id']}")
    assert record.status_code == 200 and record.json()["verdict"] == "correct"
    replay = client.post(f"/v1/records/{body['record_id']}/replay")
    assert replay.status_code == 200 and replay.json()["same_verdict"] is True


def test_group_of_responses_gets_rewards_and_advantages(client):
    task = ISSUE_REQUEST["task"]
    responses = [
        ISSUE_REQUEST["response"],
        "SELECT 'bob'",  # right on one instance only
        "SELECT name FROM emp ORDER BY name",
        "DROP TABLE emp",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        "no sql here, sorry",
    ]
    reply = client.post("/v1/groups", json={"groups": [{"verifier": "sql", "task": {**task, "timeout_s": 0.5},
                                                         "responses": responses}]})
    assert reply.status_code == 200, reply.text
    group = reply.json()["groups"][0]
    assert [r["verdict"] for r in group["results"]] == ["correct", "incorrect", "incorrect", "violation", "timeout",
                                                        "invalid_format"]
    assert group["rewards"] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert group["zero_variance"] is False
    assert group["advantages"][0] > 0 > group["advantages"][1]


def test_task_errors_are_client_errors(client):
    empty = {**ISSUE_REQUEST, "task": {**ISSUE_REQUEST["task"], "gold": "SELECT name FROM emp WHERE 0"}}
    reply = client.post("/v1/verify", json=empty)
    assert reply.status_code == 422, reply.text
    assert "empty on every instance" in reply.text
    bad = {**ISSUE_REQUEST, "task": {**ISSUE_REQUEST["task"], "dialect": "oracle"}}
    assert client.post("/v1/verify", json=bad).status_code == 422


def test_registered_task_hides_gold_query_and_gold_rows(client, app_server):
    task_id = f"sql-hidden-{uuid.uuid4().hex[:8]}"
    created = client.post("/v1/tasks", json={"task_id": task_id, "verifier": "sql", "task": HIDDEN_TASK})
    assert created.status_code == 201, created.text
    shown = client.get(f"/v1/tasks/{task_id}")
    assert shown.status_code == 200
    wrong = client.post("/v1/verify", json={"verifier": "sql", "task_id": task_id,
                                            "response": "SELECT name FROM emp WHERE dept = 'ops'"})
    assert wrong.status_code == 200 and wrong.json()["verdict"] == "incorrect"
    # A reward key gets the feedback: the expected count and fewer/same/more, never its own count or a diff.
    shown_instance = wrong.json()["evidence"]["instances"][0]
    assert shown_instance == {"instance": 0, "rows": "same", "expected_rows": 1}
    assert wrong.json()["evidence"] == wrong.json()["feedback"]
    audited = client.get(f"/v1/records/{wrong.json()['record_id']}").json()["evidence"]
    diff = audited["instances"][0]["diff"]
    assert diff["missing_count"] == 1 and "missing" not in diff  # the task did not ask to show expected rows
    right = client.post("/v1/verify", json={"verifier": "sql", "task_id": task_id,
                                            "response": "SELECT name FROM emp WHERE dept = 'dev'"})
    assert right.json()["verdict"] == "correct"
    texts = {
        "task endpoint": created.text + shown.text,
        "verify": wrong.text + right.text,
        "record": client.get(f"/v1/records/{wrong.json()['record_id']}").text,
        "export": client.get("/v1/records/export").text,
        "server log": app_server.log_path.read_text(errors="replace"),
    }
    for where, text in texts.items():
        assert GOLD_MARKER not in text, f"{where} leaked the gold query"
        assert ROW_MARKER not in text, f"{where} leaked a gold row"
