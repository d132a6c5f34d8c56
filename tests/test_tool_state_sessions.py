"""Environment sessions over HTTP against a real server: open, step, finish; finish gives
the same result and record as /v1/verify; expiry and limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.testing.app import AppServer, app_settings
from verifiers.tool_state.examples import GOLD_TRANSFER, transfer_task
from verifiers.tool_state.wire import dumps_trace

MESSAGE = "Done, your balance is 450."
COMPARED = ("verdict", "reward", "components", "evidence", "flags", "verifier_version", "task_hash")


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    """An app with small session limits so that the per-key cap is quick to reach."""
    settings = app_settings(tmp_path_factory.mktemp("assay-envs"), env_max_per_key=3, max_response_chars=6000)
    with AppServer(settings) as server:
        yield server


@pytest.fixture(scope="module")
def client(app_server: AppServer) -> Iterator[httpx.Client]:
    with app_server.client() as c:
        yield c


def open_env(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/envs", json=body or {"task": transfer_task()})
    assert response.status_code == 201, response.text
    return response.json()


def step(client: httpx.Client, env_id: str, tool: str, **args: Any) -> dict[str, Any]:
    response = client.post(f"/v1/envs/{env_id}/step", json={"tool": tool, "args": args})
    assert response.status_code == 200, response.text
    return response.json()


def finish(client: httpx.Client, env_id: str, message: str = MESSAGE, **extra: Any) -> dict[str, Any]:
    response = client.post(f"/v1/envs/{env_id}/finish", json={"final_message": message, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def same_as_verify(client: httpx.Client, result: dict[str, Any], task: dict[str, Any], response: str) -> None:
    # A session's finish answers with the feedback view (what an agent loop shows the policy).
    direct = client.post("/v1/verify", json={"verifier": "tool_state", "task": task, "response": response,
                                             "evidence": "feedback"})
    assert direct.status_code == 200, direct.text
    assert {k: result[k] for k in COMPARED} == {k: direct.json()[k] for k in COMPARED}


def test_issue_request_shape_over_http_and_groups(client: httpx.Client) -> None:
    task = transfer_task()
    response = ('{"calls": [{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 500}}], '
                '"final_message": "Done, your balance is 450."}')
    body = {"verifier": "tool_state", "task": task, "response": response}
    result = client.post("/v1/verify", json=body).json()
    assert (result["verdict"], result["reward"]) == ("correct", 1.0)
    assert result["components"] == {n: {"value": 1.0, "hard": True} for n in ("format", "compliance", "correctness")}
    nothing, peek = dumps_trace([], MESSAGE), dumps_trace([{"tool": "get_balance", "args": {"account_id": "A2"}},
                                                           GOLD_TRANSFER], MESSAGE)
    groups = client.post("/v1/groups", json={"groups": [
        {"verifier": "tool_state", "task": task, "responses": [body["response"], nothing, peek, "{"]}]})
    group = groups.json()["groups"][0]
    assert [r["verdict"] for r in group["results"]] == ["correct", "incorrect", "violation", "invalid_format"]
    assert group["rewards"] == [1.0, 0.0, 0.0, 0.0] and group["advantages"][0] > 0
    schemas = {v["name"]: v for v in client.get("/v1/verifiers").json()}
    assert "gold_actions" in schemas["tool_state"]["hidden_fields"]


def test_open_step_finish_gets_reward_1_and_matches_verify(client: httpx.Client) -> None:
    opened = open_env(client)
    assert opened["actor"] == "u1" and opened["max_steps"] == 64
    assert [t["name"] for t in opened["tools"]] == ["list_accounts", "get_balance", "transfer"]
    env_id = opened["env_id"]
    listed = step(client, env_id, "list_accounts")
    assert [a["account_id"] for a in listed["result"]["accounts"]] == ["A1", "A3"]
    assert step(client, env_id, "get_balance", account_id="A1")["result"] == {"account_id": "A1", "balance": 950}
    moved = step(client, env_id, "transfer", **GOLD_TRANSFER["args"])
    assert moved == {"ok": True, "result": {"transfer_id": "T1", "from_account": "A1", "to_account": "A2",
                                            "amount": 500, "from_balance": 450}, "error": None, "step": 2,
                     "steps_left": 61}
    result = finish(client, env_id)
    assert (result["verdict"], result["reward"]) == ("correct", 1.0)
    record = client.get(f"/v1/records/{result['record_id']}").json()
    trace = [{"tool": "list_accounts", "args": {}}, {"tool": "get_balance", "args": {"account_id": "A1"}},
             GOLD_TRANSFER]
    assert record["response"] == dumps_trace(trace, MESSAGE)
    assert record["verdict"] == "correct" and record["caller_key_id"]
    # The record shows the task's public view: hidden fields only as hashes.
    assert set(record["task"]["gold_actions"]) == set(record["task"]["required_outputs"]) == {"hmac_sha256"}
    same_as_verify(client, result, transfer_task(), record["response"])
    replayed = client.post(f"/v1/records/{result['record_id']}/replay").json()
    assert replayed["same_verdict"] and replayed["replayed_reward"] == 1.0


def test_a_forbidden_read_in_a_session_is_a_violation(client: httpx.Client) -> None:
    env_id = open_env(client)["env_id"]
    refused = step(client, env_id, "get_balance", account_id="A2")
    assert refused["ok"] is False and "among yours" in refused["error"] and refused["result"] is None
    step(client, env_id, "transfer", **GOLD_TRANSFER["args"])
    result = finish(client, env_id)
    assert (result["verdict"], result["reward"]) == ("violation", 0.0)
    assert "permission_violation" in result["flags"]
    same_as_verify(client, result, transfer_task(),
                   dumps_trace([{"tool": "get_balance", "args": {"account_id": "A2"}}, GOLD_TRANSFER], MESSAGE))


def test_unknown_tool_and_disallowed_tool_steps_are_recorded(client: httpx.Client) -> None:
    env_id = open_env(client)["env_id"]
    assert step(client, env_id, "freeze_account", account_id="A2")["error"] == \
        "tool freeze_account is not allowed in this task"
    assert step(client, env_id, "__class__")["error"] == "unknown tool '__class__'"
    result = finish(client, env_id)
    # Permission first: the forbidden tool makes it a violation, malformed as the rest is.
    assert result["verdict"] == "violation"
    assert result["components"]["format"]["value"] == 0.0
    assert {"forbidden_tool", "unknown_tool"} <= set(result["flags"])


def test_doing_nothing_in_a_session_fails(client: httpx.Client) -> None:
    result = finish(client, open_env(client)["env_id"])
    assert (result["verdict"], result["reward"]) == ("incorrect", 0.0)


def test_registered_task_by_id(app_server: AppServer, client: httpx.Client) -> None:
    registered = client.post("/v1/tasks", json={"task_id": "bank/transfer-500", "verifier": "tool_state",
                                                "task": transfer_task()})
    assert registered.status_code == 201, registered.text
    env_id = open_env(client, task_id="bank/transfer-500")["env_id"]
    step(client, env_id, "transfer", **GOLD_TRANSFER["args"])
    result = finish(client, env_id)
    assert (result["verdict"], result["task_id"]) == ("correct", "bank/transfer-500")


def test_step_limit(client: httpx.Client) -> None:
    env_id = open_env(client, task=transfer_task(max_calls=2))["env_id"]
    assert step(client, env_id, "list_accounts")["steps_left"] == 1
    step(client, env_id, "transfer", **GOLD_TRANSFER["args"])
    over = client.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts", "args": {}})
    assert over.status_code == 409 and "at most 2 calls" in over.json()["detail"]
    assert finish(client, env_id)["verdict"] == "correct"


def test_finish_is_idempotent_and_closes_the_session(app_server: AppServer, client: httpx.Client) -> None:
    # A task of its own, so that its hash finds exactly this test's records.
    env_id = open_env(client, task=transfer_task(max_calls=63))["env_id"]
    step(client, env_id, "transfer", **GOLD_TRANSFER["args"])
    first = finish(client, env_id, request_id="rollout-7")
    again = finish(client, env_id, "something else entirely")
    assert again == first
    assert client.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts"}).status_code == 409
    records = client.get("/v1/records", params={"task_hash": first["task_hash"]}).json()["records"]
    assert [r["id"] for r in records] == [first["record_id"]]


def test_sessions_belong_to_their_key(app_server: AppServer, client: httpx.Client) -> None:
    env_id = open_env(client)["env_id"]
    with app_server.client(app_server.create_key("reward")) as other:
        assert other.post(f"/v1/envs/{env_id}/step", json={"tool": "list_accounts"}).status_code == 404
        assert other.post(f"/v1/envs/{env_id}/finish", json={"final_message": "x"}).status_code == 404
    assert client.post("/v1/envs/env_nope/step", json={"tool": "list_accounts"}).status_code == 404
    with app_server.anonymous() as anonymous:
        assert anonymous.post("/v1/envs", json={"task": transfer_task()}).status_code == 401


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"task": transfer_task(actor="nobody")}, "actor"),
        ({"verifier": "math", "task": {"answer": "1"}}, "only for the 'tool_state' verifier"),
        ({"task": transfer_task(), "task_id": "x"}, "exactly one"),
    ],
)
def test_bad_open_requests(client: httpx.Client, body: dict[str, Any], message: str) -> None:
    response = client.post("/v1/envs", json=body)
    assert response.status_code == 422 and message in response.text


def test_sessions_refuse_huge_states(client: httpx.Client) -> None:
    task = transfer_task()
    task["initial_state"]["users"].update({f"x{i}": {"name": "n" * 100, "role": "customer"} for i in range(9000)})
    response = client.post("/v1/envs", json={"task": task})
    assert response.status_code == 422 and "environment sessions take at most" in response.json()["detail"]


def test_unknown_task_id_is_404(client: httpx.Client) -> None:
    assert client.post("/v1/envs", json={"task_id": "no/such/task"}).status_code == 404


def test_bad_step_bodies_are_rejected_without_recording(client: httpx.Client) -> None:
    env_id = open_env(client)["env_id"]
    for body in ({"tool": "get_balance", "args": "A1"}, {"tool": "x" * 65}, {"args": {}},
                 {"tool": "get_balance", "args": {"account_id": "A" * 5000}}):
        assert client.post(f"/v1/envs/{env_id}/step", json=body).status_code == 422
    assert step(client, env_id, "list_accounts")["step"] == 0


@pytest.mark.slow
def test_sessions_are_limited_per_key(limited_server: AppServer) -> None:
    # Expiry is tested on an injected clock, without sleeping: tests/test_env_sessions.py.
    with limited_server.client() as c:
        ids = [open_env(c)["env_id"] for _ in range(3)]
        refused = c.post("/v1/envs", json={"task": transfer_task()})
        assert refused.status_code == 429 and "3 open environment sessions" in refused.json()["detail"]
        # Deleting one frees its slot; a finished one does not count either.
        assert c.delete(f"/v1/envs/{ids[0]}").status_code == 204
        assert finish(c, ids[1])["verdict"] == "incorrect"
        ids += [open_env(c)["env_id"], open_env(c)["env_id"]]
        again = c.post("/v1/envs", json={"task": transfer_task()})
        assert again.status_code == 429 and "3 open environment sessions" in again.json()["detail"]
        assert step(c, ids[2], "list_accounts")["step"] == 0  # the open ones still work




@pytest.mark.slow
def test_steps_stop_before_the_trace_outgrows_the_verify_limit(limited_server: AppServer) -> None:
    # The server accepts responses of at most 6000 characters; 2000 are kept for the message.
    with limited_server.client(limited_server.create_key("reward")) as c:
        env_id = open_env(c)["env_id"]
        for _ in range(2):
            assert step(c, env_id, "get_balance", account_id="A" * 1500)["ok"] is False
        refused = c.post(f"/v1/envs/{env_id}/step", json={"tool": "get_balance", "args": {"account_id": "A" * 1500}})
        assert refused.status_code == 409 and "response limit (6000 characters)" in refused.json()["detail"]
        step(c, env_id, "transfer", **GOLD_TRANSFER["args"])
        assert finish(c, env_id)["verdict"] == "correct"
