"""ASSAY_WARM_UP: which verifier families the service warms before it says ready
(service/warm_up.py). A deployment warms all of them (tests/test_proof_steady.py proves that
then the first proof group reads no set.mm); a service told to skip a family starts none of
its pools, and that family's first request starts them and still gets its reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.app import create_app
from service.config import Settings
from service.testing.app import AppServer, app_settings
from verifiers.math import verifier as math_module
from verifiers.proof import verifier as proof_module
from verifiers.registry import names

POOLS = {"math": (math_module.SESSIONS.pool,), "proof": (proof_module.SESSIONS.pool, proof_module.POOL)}
MATH = {"verifier": "math", "task": {"answer": "4"}, "response": r"2 + 2 = \boxed{4}"}


def started(server: AppServer, family: str) -> int:
    sandbox = server.app.state.pipeline.executor.sandbox
    return sum(sandbox.workers_started(pool) for pool in POOLS[family])


def test_a_deployment_warms_every_verifier(monkeypatch):
    monkeypatch.delenv("ASSAY_WARM_UP", raising=False)  # the suite's own default skips proof
    assert Settings().warm_up == "all"


def test_only_the_named_families_are_warmed_before_the_first_request(tmp_path: Path):
    with AppServer(app_settings(tmp_path, warm_up="math")) as server:
        assert started(server, "math") >= 1
        assert started(server, "proof") == 0
        reply = server.test_client.post("/v1/verify", json=MATH)
        assert reply.status_code == 200, reply.text
        assert reply.json()["reward"] == 1.0


def test_an_unwarmed_family_starts_its_pools_in_its_first_request(tmp_path: Path):
    with AppServer(app_settings(tmp_path, warm_up="none")) as server:
        assert started(server, "math") == 0
        wrong = server.test_client.post("/v1/verify", json={**MATH, "response": r"\boxed{5}"})
        assert wrong.status_code == 200, wrong.text
        assert wrong.json()["reward"] == 0.0
        assert started(server, "math") >= 1
        assert server.test_client.post("/v1/verify", json=MATH).json()["reward"] == 1.0


@pytest.mark.parametrize("spec", ["math,prooof", "everything", "math;proof"])
def test_a_family_that_does_not_exist_stops_the_start_naming_the_setting(tmp_path: Path, spec: str):
    with pytest.raises(ValueError, match="ASSAY_WARM_UP") as raised:
        create_app(app_settings(tmp_path, warm_up=spec))
    assert all(name in str(raised.value) for name in names())  # it lists what exists
