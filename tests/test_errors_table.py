"""One table of errors to statuses (service/errors.py): every exception there has a row, the
statuses follow the tree (Rejected: 4xx, RetryLater: 429/503 + Retry-After), each route's
OpenAPI `responses` come from the table, and the HTTP answers agree with it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import service.errors as errors
from service.app import create_app
from service.auth import create_key
from service.config import Settings
from service.store import AuditStore

OWN = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
       if issubclass(cls, Exception) and cls.__module__ == "service.errors"]
BASES = {errors.ServiceError, errors.Rejected, errors.RetryLater}


def test_every_exception_in_errors_py_has_a_row():
    assert len(OWN) >= 20
    missing = [cls.__name__ for cls in OWN if cls not in BASES and errors.status_of(cls) is None]
    assert missing == []


@pytest.mark.parametrize("cls", [c for c in OWN if c not in BASES], ids=lambda c: c.__name__)
def test_the_status_follows_the_recourse(cls: type[Exception]):
    status = errors.status_of(cls)
    assert status is not None
    if issubclass(cls, errors.RetryLater):
        assert status.code in (429, 503)
    else:
        assert issubclass(cls, errors.Rejected) and 400 <= status.code < 500


def test_routes_document_the_statuses_of_what_they_raise(tmp_path: Path):
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'a.db'}"))
    paths = app.openapi()["paths"]
    assert {"404", "422"} <= set(paths["/v1/records/{record_id}/replay"]["post"]["responses"])
    assert "503" in paths["/v1/groups"]["post"]["responses"]
    assert "409" in paths["/v1/verify"]["post"]["responses"]
    assert {"404", "409", "429"} <= set(paths["/v1/envs/{env_id}/step"]["post"]["responses"])
    assert "503" in paths["/v1/openrlhf"]["post"]["responses"]


@pytest.mark.slow
def test_http_answers_follow_the_table(tmp_path: Path):
    """Each kind of 404 names its own thing; a 401 asks for a bearer key; a service-wide
    session cap is a 429 with Retry-After, a per-key cap a 429 without it."""
    db = f"sqlite:///{tmp_path / 'a.db'}"
    settings = Settings(database_url=db, env_max_per_key=1, retry_after_s=7,
                        signing_key_path=tmp_path / "k.pem", fingerprint_key_file=tmp_path / "f.key")
    store = AuditStore(db)
    key = create_key(store, ["admin"])
    store.close()
    from verifiers.tool_state.examples import transfer_task

    with TestClient(create_app(settings)) as client:
        headers = {"Authorization": f"Bearer {key}"}
        reply = client.get("/v1/records/nope")
        assert reply.status_code == 401 and reply.headers["WWW-Authenticate"] == "Bearer"
        for path, word in (("/v1/records/nope", "record"), ("/v1/evals/nope", "evaluation"),
                           ("/v1/runs/nope", "run"), ("/v1/tasks/nope", "task_id"),
                           ("/v1/verifiers/math/diff", "diff report")):
            reply = client.get(path, headers=headers)
            assert reply.status_code == 404, path
            assert word in reply.json()["detail"]
        first = client.post("/v1/envs", json={"verifier": "tool_state", "task": transfer_task()}, headers=headers)
        assert first.status_code == 201
        again = client.post("/v1/envs", json={"verifier": "tool_state", "task": transfer_task()}, headers=headers)
        assert again.status_code == 429 and "Retry-After" not in again.headers
        # The honest path still works: the open session takes a step.
        step = client.post(f"/v1/envs/{first.json()['env_id']}/step", headers=headers,
                           json={"tool": "get_balance", "args": {"account": "alice"}})
        assert step.status_code == 200, step.text


@pytest.mark.slow
def test_a_retry_later_error_carries_retry_after(tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'a.db'}"
    settings = Settings(database_url=db, env_max_sessions=1, retry_after_s=7,
                        signing_key_path=tmp_path / "k.pem", fingerprint_key_file=tmp_path / "f.key")
    store = AuditStore(db)
    key = create_key(store, ["reward"])
    store.close()
    from verifiers.tool_state.examples import transfer_task

    with TestClient(create_app(settings)) as client:
        headers = {"Authorization": f"Bearer {key}"}
        assert client.post("/v1/envs", json={"verifier": "tool_state", "task": transfer_task()},
                           headers=headers).status_code == 201
        full = client.post("/v1/envs", json={"verifier": "tool_state", "task": transfer_task()}, headers=headers)
        assert full.status_code == 429 and full.headers["Retry-After"] == "7"
