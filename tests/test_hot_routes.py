"""The reward routes' observable behaviour, pinned through HTTP (held out: written and passing
on main 1146b41 before the routes got a lane of their own, issue 27 item 1).

- Every refusal in tests/data/hot_route_refusals.json (malformed, empty, wrong-typed, extra
  and oversized fields, lone surrogates, NaN, non-UTF-8 bytes, wrong content types, limits,
  unknown verifiers, invalid tasks, missing registered tasks, long headers) gets the same
  status and the same JSON body, word for word, as on main 1146b41 (the file was written from
  that commit's answers); never a 5xx. Each is followed by an honest answer that still gets
  its reward.
- A missing key is 401, a key without `reward` 403, a body over max_body_bytes 413.
- A 200 carries exactly the result fields it had, as `application/json` with the request id;
  every receipt verifies with the trainer client's check against the published key; every
  answered result has its record, with the same decision; a repeated `request_id` or
  Idempotency-Key answers from the log without a new record.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trainer_client.receipts import ReceiptKey, check_result

REFUSALS = json.loads((Path(__file__).parent / "data" / "hot_route_refusals.json").read_text())
HONEST = {"verifier": "math", "task": {"answer": "2"}, "response": "\\boxed{2}"}
RESULT_FIELDS = {"record_id", "verifier", "verifier_version", "reward", "verdict", "components", "evidence",
                 "feedback", "flags", "flag_evidence", "duration_ms", "task_id", "task_hash", "request_id",
                 "tokens", "finish_reason", "masked", "receipt"}
GROUP_FIELDS = {"group_id", "results", "rewards", "advantages", "mean", "std", "zero_variance", "errors", "masked",
                "error"}


def _honest_still_rewarded(client) -> None:
    r = client.post("/v1/verify", json=HONEST)
    assert r.status_code == 200, r.text
    assert r.json()["reward"] == 1.0


def _key(client) -> ReceiptKey:
    return ReceiptKey.parse(client.get("/v1/receipts/key").json()["public_key"])


def _record(client, record_id: str) -> dict:
    r = client.get(f"/v1/records/{record_id}")
    assert r.status_code == 200, r.text
    return r.json()


def _count(client, **params: str) -> int:
    return len(client.get("/v1/records", params={"limit": 500, **params}).json()["records"])


@pytest.mark.parametrize("case", REFUSALS, ids=[c["name"] for c in REFUSALS])
def test_refusal_is_the_same_answer(client, case: dict) -> None:
    headers = dict(case["headers"])
    if case["content_type"] is not None:
        headers["content-type"] = case["content_type"]
    r = client.post(case["path"], content=base64.b64decode(case["body_b64"]), headers=headers)
    assert r.status_code == case["status"], r.text
    assert 400 <= r.status_code < 500
    assert r.headers["content-type"] == "application/json"
    assert r.json() == case["answer"]
    _honest_still_rewarded(client)


def test_auth_and_size_refusals(client, app_server) -> None:
    r = client.post("/v1/verify", json=HONEST, headers={"Authorization": ""})
    assert (r.status_code, r.json()) == (401, {"detail": "missing API key: send `Authorization: Bearer <key>`"})
    assert r.headers["www-authenticate"] == "Bearer"
    audit = app_server.create_key("audit")
    for path, body in (("/v1/verify", HONEST), ("/v1/groups", {"groups": [{**HONEST, "responses": ["1"]}]})):
        body = {k: v for k, v in body.items() if not (path == "/v1/groups" and k == "response")}
        r = client.post(path, json=body, headers={"Authorization": f"Bearer {audit}"})
        assert (r.status_code, r.json()) == (403, {"detail": "this API key lacks the 'reward' scope"})
        r = client.post(path, json=body, headers={"Authorization": "Bearer ak_0000_not-a-key"})
        assert (r.status_code, r.json()) == (401, {"detail": "invalid or revoked API key"})
    r = client.post("/v1/verify", content=b"x" * (8 * 1024 * 1024 + 1), headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (413, {"detail": "request body exceeds max_body_bytes (8388608 bytes)"})
    _honest_still_rewarded(client)


def test_verify_answer_receipt_and_record(client) -> None:
    key = _key(client)
    for response, reward, verdict in (("\\boxed{2}", 1.0, "correct"), ("The answer is \\boxed{3}.", 0.0, "incorrect"),
                                      ("no answer at all", 0.0, "invalid_format")):
        r = client.post("/v1/verify", json={**HONEST, "response": response}, headers={"X-Request-ID": "hot-route-1"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.headers["x-request-id"] == "hot-route-1"
        assert int(r.headers["content-length"]) == len(r.content)
        result = r.json()
        assert set(result) == RESULT_FIELDS
        assert (result["reward"], result["verdict"], result["verifier"]) == (reward, verdict, "math")
        assert result["request_id"] is None and result["task_id"] is None
        payload = check_result(result, key, response)
        assert payload["record_id"] == result["record_id"]
        row = _record(client, result["record_id"])
        for field in ("reward", "verdict", "task_hash", "components", "flags", "verifier_version", "evidence"):
            assert row[field] == result[field], field
        assert row["response"] == response
    # a generation object: its tokens and finish reason are kept
    r = client.post("/v1/verify", json={**HONEST, "response": {"text": "\\boxed{2}", "tokens": 7,
                                                                  "finish_reason": "stop"}})
    assert r.status_code == 200, r.text
    assert (r.json()["tokens"], r.json()["finish_reason"], r.json()["reward"]) == (7, "stop", 1.0)
    assert _record(client, r.json()["record_id"])["tokens"] == 7


def test_verify_request_id_repeats_from_the_log(client) -> None:
    body = {**HONEST, "request_id": "hot-route-repeat"}
    first = client.post("/v1/verify", json=body)
    assert first.status_code == 200, first.text
    before = _count(client, verifier="math")
    again = client.post("/v1/verify", json=body)
    assert again.status_code == 200
    assert again.json()["record_id"] == first.json()["record_id"]
    assert again.json()["reward"] == first.json()["reward"]
    assert _count(client, verifier="math") == before
    other = client.post("/v1/verify", json={**body, "response": "\\boxed{3}"})
    assert other.status_code == 409
    assert other.json()["detail"].startswith("request_id: 'hot-route-repeat' was already used for a different request")
    _honest_still_rewarded(client)


def test_groups_answer_receipts_records_and_idempotency(client) -> None:
    key = _key(client)
    responses = ["\\boxed{2}", "\\boxed{3}", "2", "nothing"]
    body = {"groups": [{"verifier": "math", "task": {"answer": "2"}, "responses": responses, "group_id": "hot-g1"},
                       {"verifier": "math", "task": {"answer": "5"}, "responses": ["\\boxed{5}"]}]}
    r = client.post("/v1/groups", json=body, headers={"Idempotency-Key": "hot-route-idem"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    answer = r.json()
    assert set(answer) == {"groups"} and len(answer["groups"]) == 2
    g = answer["groups"][0]
    assert set(g) == GROUP_FIELDS
    assert g["group_id"] == "hot-g1" and g["error"] is None and g["errors"] == 0
    assert g["rewards"] == [r["reward"] for r in g["results"]]
    assert g["rewards"][0] == 1.0 and g["rewards"][1] == 0.0
    assert len(g["advantages"]) == 4 and g["mean"] is not None and g["std"] is not None
    for i, (result, response) in enumerate(zip(g["results"], responses, strict=True)):
        assert set(result) == RESULT_FIELDS
        check_result(result, key, response)
        row = _record(client, result["record_id"])
        assert (row["group_id"], row["group_index"], row["reward"]) == ("hot-g1", i, result["reward"])
    assert answer["groups"][1]["rewards"] == [1.0]
    before = _count(client, group_id="hot-g1")
    assert before == 4
    again = client.post("/v1/groups", json=body, headers={"Idempotency-Key": "hot-route-idem"})
    assert again.status_code == 200
    assert again.json() == answer
    assert _count(client, group_id="hot-g1") == 4
    other = client.post("/v1/groups", json={**body, "groups": body["groups"][:1]},
                        headers={"Idempotency-Key": "hot-route-idem"})
    assert other.status_code == 422
    assert "Idempotency-Key" in other.json()["detail"]
    _honest_still_rewarded(client)


def test_registered_task_through_both_routes(client) -> None:
    r = client.post("/v1/tasks", json={"task_id": "hot-route-task", "verifier": "math", "task": {"answer": "9"}})
    assert r.status_code in (200, 201), r.text
    one = client.post("/v1/verify", json={"verifier": "math", "task_id": "hot-route-task", "response": "\\boxed{9}"})
    assert one.status_code == 200, one.text
    assert (one.json()["reward"], one.json()["task_id"]) == (1.0, "hot-route-task")
    group = client.post("/v1/groups", json={"groups": [{"verifier": "math", "task_id": "hot-route-task",
                                                        "responses": ["\\boxed{9}", "\\boxed{8}"]}]})
    assert group.status_code == 200, group.text
    assert group.json()["groups"][0]["rewards"] == [1.0, 0.0]
    wrong = client.post("/v1/verify", json={"verifier": "sql", "task_id": "hot-route-task", "response": "x"})
    assert wrong.status_code == 422
    assert wrong.json()["detail"] == "verifier: task 'hot-route-task' belongs to verifier 'math'"
