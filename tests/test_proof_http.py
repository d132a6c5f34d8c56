"""The `proof` verifier through the HTTP API (the real app, in-process): the issue's task shape in a group,
evidence and flags on the record, and task errors as 400s naming the field."""

from __future__ import annotations

import pytest

from service.testing.metamath import SET_MM

pytestmark = pytest.mark.skipif(not SET_MM.exists(), reason="metamath-databases is not installed")

TASK = {"system": "metamath", "database": "set.mm", "theorem": "mp2"}


@pytest.fixture(scope="module")
def client(app_server):
    with app_server.client(timeout=180) as c:
        yield c


def test_group_of_proofs_gets_rewards_and_logged_evidence(client):
    responses = ["```metamath\n( wi ax-mp ) BCEABCGDFHH\n```",
                 "$= ( wi ax-mp ) BCEABCGDF?H $.",
                 "$= wph wps wch mp2.1 mp2.2 mp2.3 mp2 $.",
                 "no proof today"]
    reply = client.post("/v1/groups", json={"groups": [{"verifier": "proof", "task": TASK, "responses": responses}]})
    assert reply.status_code == 200, reply.text
    group = reply.json()["groups"][0] if "groups" in reply.json() else reply.json()
    results = group["results"]
    assert [r["verdict"] for r in results] == ["correct", "violation", "violation", "invalid_format"]
    assert group["rewards"] == [1.0, 0.0, 0.0, 0.0]
    record = client.get(f"/v1/records/{results[1]['record_id']}").json()
    assert "incomplete_proof" in str(record["flags"])
    assert record["evidence"]["first_failure"]["reason"]
    assert client.get(f"/v1/records/{results[0]['record_id']}").json()["evidence"]["axioms"] == ["ax-mp"]


@pytest.mark.parametrize(("task", "field"), [
    ({**TASK, "theorem": "no-such-theorem"}, "task.theorem"),
    ({**TASK, "forbidden_axioms": ["not-an-axiom"]}, "task.forbidden_axioms"),
    ({"system": "metamath", "theorem": "mp2", "statement": {"label": "s", "assertion": "|- ph"}}, "task"),
])
def test_task_errors_are_client_errors_naming_the_field(client, task, field):
    reply = client.post("/v1/verify", json={"verifier": "proof", "task": task, "response": "$= wph $."})
    assert 400 <= reply.status_code < 500, reply.text
    assert field in reply.text
