"""Red team 7: a NUL (U+0000) in what a caller sends, on SQLite and on Postgres.

Postgres text cannot hold U+0000. Before the fix, on Postgres one response holding a NUL
made its whole group's records unstorable: the request was answered 503 (which every
client retries), so the honest responses beside it got no reward; a NUL in a
`request_id`, a label's note or an evaluation's name was a 500. Now a response's NUL is
stored and read back as sent (service/nul_text.py), judged beside its group's honest
answers, and the chain verifies; a NUL in an identifier or a name is a 422 naming the field."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from service.testing.app import AppServer, app_settings
from tests.test_audit_chain import audit_verify
from tests.test_audit_postgres import postgres_url  # noqa: F401  (fixture)
from verifiers.tool_state.examples import transfer_task

RIGHT = "\\boxed{42}"


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    options: dict = {}
    admin = name = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        name, admin = f"assay_rt7_{uuid.uuid4().hex[:10]}", url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        options["database_url"] = url.rsplit("/", 1)[0] + "/" + name
    try:
        with AppServer(app_settings(tmp_path_factory.mktemp(f"rt7-nul-{request.param}"), **options)) as s:
            yield s
    finally:
        if name is not None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_response_with_a_nul_is_judged_stored_and_harms_no_one(server: AppServer):
    hostile = ["\\boxed{42}\u0000", "\u0000", "\ufdd0\u0000\ufdd1\ufdd3 \\boxed{41}", "\ufdd0 starts with the tag"]
    with server.client() as c:
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "42"},
                                                       "responses": [*hostile, RIGHT]}]})
        assert reply.status_code == 200, reply.text[:500]
        results = reply.json()["groups"][0]["results"]
        assert results[-1]["reward"] == 1.0 and all(r["verdict"] != "error" for r in results), results
        for text, result in zip(hostile, results, strict=False):
            record = c.get(f"/v1/records/{result['record_id']}").json()
            assert record["response"] == text  # read back exactly as sent
            replay = c.post(f"/v1/records/{result['record_id']}/replay")
            assert replay.status_code == 200 and replay.json()["same_verdict"] is True, replay.text
        # The same through OpenRLHF, a label's note and an environment's final message.
        rl = c.post("/v1/openrlhf", json={"query": ["Q: \\boxed{42}\u0000"], "prompts": ["Q: "], "labels": ["42"]})
        assert rl.status_code == 200 and rl.json()["rewards"] == [1.0], rl.text[:500]
        label = c.post(f"/v1/records/{results[0]['record_id']}/labels", json={"label": "agree", "note": "a\u0000b"})
        assert label.status_code == 201, label.text
        assert c.get(f"/v1/records/{results[0]['record_id']}/labels").json()[-1]["note"] == "a\u0000b"
        env = c.post("/v1/envs", json={"verifier": "tool_state", "task": transfer_task()}).json()
        finish = c.post(f"/v1/envs/{env['env_id']}/finish", json={"final_message": "\u0000"})
        assert finish.status_code == 200 and finish.json()["verdict"] != "error", finish.text[:500]


NAMED = [
    ("/v1/verify", {"verifier": "math", "task": {"answer": "42"}, "response": RIGHT, "request_id": "r\u0000"},
     "request_id"),
    ("/v1/verify", {"verifier": "math", "task": {"answer": "42"},
                    "response": {"text": RIGHT, "finish_reason": "s\u0000"}}, "finish_reason"),
    ("/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": "42"},
                                "responses": [{"text": RIGHT, "finish_reason": "\u0000"}]}]}, "finish_reason"),
    ("/v1/evals", {"name": "e\u0000", "checkpoint": "c", "families": {"m": [
        {"verifier": "math", "task": {"answer": "42"}, "responses": [RIGHT]}]}}, "name"),
    ("/v1/evals", {"name": "e", "checkpoint": "c\u0000", "families": {"m": [
        {"verifier": "math", "task": {"answer": "42"}, "responses": [RIGHT]}]}}, "checkpoint"),
    ("/v1/verify", {"verifier": "math\u0000", "task": {"answer": "42"}, "response": RIGHT}, "verifier"),
]


@pytest.mark.parametrize(("path", "body", "field"), NAMED, ids=[f"{p}-{f}" for p, _, f in NAMED])
def test_a_nul_in_an_identifier_or_a_name_is_a_422_naming_it(server: AppServer, path: str, body: dict, field: str):
    with server.client() as c:
        reply = c.post(path, json=body)
        assert reply.status_code == 422, reply.text[:500]
        assert field in reply.json()["detail"], reply.text[:500]
        honest = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "42"}, "response": RIGHT})
        assert honest.status_code == 200 and honest.json()["reward"] == 1.0


def test_the_history_with_nuls_verifies(server: AppServer):
    """What was hashed is what reads back: `assay audit verify` is intact (run last: it signs
    the open chains' heads first, as a shutdown does)."""
    server.app.state.store.close()
    key = server.workdir / "assay.signing-key.pem"
    checked = audit_verify(server.db_url, key if key.exists() else next(server.workdir.glob("*.pem")))
    assert checked.returncode == 0, checked.stdout + checked.stderr
