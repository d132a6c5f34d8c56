"""A verifier that breaks the reward contract's numbers, on SQLite and on Postgres.

Every component is a number in [0, 1] and a record's numbers must be storable. A verifier
bug (a NaN from 0/0, an infinity, a component of 1.5, a NaN inside its evidence) must
never become a reward, an unstorable record (a 503 that every client retries, harming the
honest responses of its group) or a 5xx: the response gets verdict `error`, its record is
written and chained like any other, and the honest answers beside it keep their rewards.

The math verifier is made buggy here by patching its `verify_many` in this process (the
app runs in-process): the fault is injected, the service around it is the real one."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from service.testing.app import AppServer, app_settings
from tests.test_audit_chain import audit_verify
from tests.test_audit_postgres import postgres_url  # noqa: F401  (fixture)
from verifiers.base import Component, Outcome, Verdict
from verifiers.math.verifier import MathVerifier

RIGHT = "\\boxed{42}"
NAN, INF = float("nan"), float("inf")

# What the buggy verifier returns for a response that names one of these keys.
BROKEN: dict[str, Outcome] = {
    "nan-correctness": Outcome(Verdict.correct, [Component("correctness", NAN, False)]),
    "inf-soft": Outcome(Verdict.correct, [Component("correctness", 1.0, True), Component("resources", INF, False)]),
    "minus-inf-soft": Outcome(Verdict.correct, [Component("correctness", 1.0, True),
                                                Component("resources", -INF, False)]),
    "above-one": Outcome(Verdict.correct, [Component("correctness", 1.5, False)]),
    "below-zero": Outcome(Verdict.correct, [Component("correctness", 1.0, True), Component("process", -0.5, False)]),
    "nan-evidence": Outcome(Verdict.correct, [Component("correctness", 1.0, True)],
                            {"ratio": NAN, "deep": {"list": [1.0, INF]}}),
    "bool-component": Outcome(Verdict.correct, [Component("correctness", True, True)]),  # type: ignore[arg-type]
}


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    options: dict[str, Any] = {}
    admin = name = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        name, admin = f"assay_vn_{uuid.uuid4().hex[:10]}", url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        options["database_url"] = url.rsplit("/", 1)[0] + "/" + name
    try:
        with AppServer(app_settings(tmp_path_factory.mktemp(f"numbers-{request.param}"), **options)) as s:
            yield s
    finally:
        if name is not None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def buggy_math(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = MathVerifier.verify_many

    def verify_many(self, task, responses, ctx):  # type: ignore[no-untyped-def]
        judged = honest(self, task, responses, ctx)
        return [BROKEN.get(text.split("|")[0], out) for text, out in zip(responses, judged, strict=True)]

    monkeypatch.setattr(MathVerifier, "verify_many", verify_many)


def test_numbers_outside_the_contract_are_an_error_never_a_reward(server: AppServer, buggy_math: None):
    broken = [f"{key}|{RIGHT}" for key in BROKEN]
    with server.client() as c:
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "42"},
                                                       "responses": [*broken, RIGHT, "\\boxed{41}"]}]})
        assert reply.status_code == 200, reply.text[:500]
        group = reply.json()["groups"][0]
        results = group["results"]
        for key, result in zip(BROKEN, results, strict=False):
            assert result["verdict"] == "error", (key, result)
            assert result["reward"] == 0.0, (key, result)
            assert result["record_id"], (key, result)
            record = c.get(f"/v1/records/{result['record_id']}")
            assert record.status_code == 200, record.text[:300]
            assert record.json()["verdict"] == "error"
            assert record.json()["evidence"]["error"] == "verifier_error"
            assert "contract" in record.json()["evidence"]["message"]
            assert all(math.isfinite(c["value"]) for c in record.json()["components"].values())
        # The honest answers beside them are judged as usual, and the errors stay out of the group statistics.
        assert [r["verdict"] for r in results[-2:]] == ["correct", "incorrect"]
        assert group["rewards"][-2:] == [1.0, 0.0]
        assert all(a is None for a in group["advantages"][:len(BROKEN)])
        assert group["advantages"][-2] > 0 > group["advantages"][-1]
        # One answer per request too.
        single = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "42"},
                                            "response": f"nan-evidence|{RIGHT}"})
        assert single.status_code == 200 and single.json()["verdict"] == "error", single.text[:300]
        # Every view of the history still reads: the overview, the records page, the export.
        for path in ("/v1/records?verdict=error", "/v1/records/export", "/v1/tasks/stats", "/v1/review/summary"):
            page = c.get(path)
            assert page.status_code == 200, (path, page.text[:300])


def test_an_honest_verifier_still_rewards_after_the_fix(server: AppServer):
    with server.client() as c:
        reply = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": "42"}, "response": RIGHT})
        assert reply.status_code == 200 and reply.json()["reward"] == 1.0, reply.text[:300]
        assert reply.json()["verdict"] == "correct"


def test_the_history_with_a_buggy_verifier_verifies(server: AppServer, buggy_math: None):
    with server.client() as c:
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "math", "task": {"answer": "42"},
                                                       "responses": [f"{key}|x" for key in BROKEN]}]})
        assert reply.status_code == 200, reply.text[:300]
    # Run last: closing the store signs the open chains' heads, as a shutdown does.
    server.app.state.store.close()
    key = server.workdir / "assay.signing-key.pem"
    checked = audit_verify(server.db_url, key if key.exists() else next(server.workdir.glob("*.pem")))
    assert checked.returncode == 0, checked.stdout + checked.stderr
