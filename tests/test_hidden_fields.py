"""Registered tasks keep their hidden fields hidden: no read endpoint or result returns them
in clear; records keep the full evidence for `audit` keys (inline tasks came from the caller,
who holds them already). The leak battery is tests/test_leak_battery.py."""

from __future__ import annotations

import json

from service.testing.app import AppServer
from verifiers.tool_state.examples import bank_state, transfer_task
from verifiers.tool_state.wire import dumps_trace

# Hidden values long and odd enough that no uuid, hash or timing in the output contains them
# by chance (a 3-digit marker could appear in any of those).
HIDDEN_AMOUNT = 1_234_567
SOURCE_BALANCE = 9_137_461
HIDDEN_MARKERS = (str(HIDDEN_AMOUNT), str(SOURCE_BALANCE - HIDDEN_AMOUNT), str(2_000_000 + HIDDEN_AMOUNT))


def secret_transfer_task() -> dict:
    state = bank_state()
    state["accounts"]["A1"]["balance"] = SOURCE_BALANCE
    state["accounts"]["A2"]["balance"] = 2_000_000
    gold = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": HIDDEN_AMOUNT}}
    return transfer_task(initial_state=state, gold_actions=[gold],
                         required_outputs=[str(SOURCE_BALANCE - HIDDEN_AMOUNT)])


def test_registered_tool_state_task_hides_expected_values(app_server: AppServer):
    task = secret_transfer_task()
    wrong = dumps_trace([{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 5}}],
                        "Done.")
    with app_server.client() as c:
        assert c.post("/v1/tasks", json={"task_id": "bank/secret", "verifier": "tool_state", "task": task}).is_success
        shown = c.get("/v1/tasks/bank/secret").json()
        result = c.post("/v1/verify", json={"verifier": "tool_state", "task_id": "bank/secret", "response": wrong})
        assert result.status_code == 200 and result.json()["verdict"] == "incorrect"
        record = c.get(f"/v1/records/{result.json()['record_id']}").json()
        export = c.get("/v1/records/export", params={"task_id": "bank/secret"}).text
        # The same wrong answer to the same task given inline: there the caller holds the
        # values, so the evidence shows them — which proves the markers would be seen.
        inline = c.post("/v1/verify", json={"verifier": "tool_state", "task": task, "response": wrong}).text
    for text in (json.dumps(shown), result.text):
        for marker in HIDDEN_MARKERS:
            assert marker not in text
    assert any(marker in inline for marker in HIDDEN_MARKERS)
    # Records keep the full evidence for auditors (the record and export are `audit` reads).
    assert {d["want"] for d in record["evidence"]["state_diff"]} >= {SOURCE_BALANCE - HIDDEN_AMOUNT}
    assert str(SOURCE_BALANCE - HIDDEN_AMOUNT) in export
    assert record["feedback"] == result.json()["feedback"] == result.json()["evidence"]


def test_inline_task_evidence_shows_the_diff(app_server: AppServer):
    task = transfer_task()
    wrong = dumps_trace([{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 5}}],
                        "Done.")
    with app_server.client() as c:
        result = c.post("/v1/verify", json={"verifier": "tool_state", "task": task, "response": wrong}).json()
    wants = {d["want"] for d in result["evidence"]["state_diff"] if not isinstance(d["want"], dict)}
    assert 450 in wants


def test_registered_sql_task_never_shows_gold_rows(app_server: AppServer):
    task = {
        "dialect": "sqlite",
        "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT);",
        "instances": ["INSERT INTO emp VALUES (1,'zelda-secret','dev'),(2,'bob','ops');"],
        "gold": "SELECT name FROM emp WHERE dept = 'dev'",
        "show_expected": True,
    }
    wrong = "```sql\nSELECT name FROM emp WHERE dept = 'ops'\n```"
    with app_server.client() as c:
        assert c.post("/v1/tasks", json={"task_id": "sql/secret", "verifier": "sql", "task": task}).is_success
        result = c.post("/v1/verify", json={"verifier": "sql", "task_id": "sql/secret", "response": wrong})
        assert result.json()["verdict"] == "incorrect"
        record = c.get(f"/v1/records/{result.json()['record_id']}").text
        inline = c.post("/v1/verify", json={"verifier": "sql", "task": task, "response": wrong}).text
    assert "zelda-secret" not in result.text and "dept = 'dev'" not in result.text
    assert "zelda-secret" in record  # the audit view: the task asked for expected rows
    assert "dept = 'dev'" not in record  # the task itself is shown with keyed fingerprints
    assert "zelda-secret" in inline  # the inline caller asked for expected rows and holds them anyway
