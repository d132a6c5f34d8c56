"""Verdict `error` says which part failed, in words we wrote, and /metrics counts it by
cause (issue 17). The failures here are real: a sandbox pool whose workers cannot
start, and a Postgres-dialect task on a service with no Postgres server configured."""

from __future__ import annotations

import re

import pytest

from sandboxes.base import Limits, SandboxError
from tests.conftest import LiveServer

POSTGRES_TASK = {"dialect": "postgres", "schema": "CREATE TABLE t(a int);", "instances": ["INSERT INTO t VALUES (1);"],
                 "gold": "SELECT a FROM t"}


def test_a_pool_that_cannot_start_fails_with_a_stable_cause(sandbox):
    # No candidate code ever ran: this is the infrastructure's failure, named as such.
    with pytest.raises(SandboxError) as failure:
        sandbox.call("verifiers.code.inside.candidate:serve", {}, Limits(wall_s=5), pool="broken-pool",
                     preload=("no_such_module_for_assay",))
    assert failure.value.cause in {"worker_start_failed", "container_start_failed"}
    assert "Traceback" not in str(failure.value) and "no_such_module" not in str(failure.value)


@pytest.mark.slow
def test_error_evidence_names_the_cause_and_metrics_count_it(tmp_path):
    server = LiveServer(tmp_path, env={"ASSAY_SQL_POSTGRES_URL": ""})
    try:
        with server.client() as client:
            result = client.post("/v1/verify", json={"verifier": "sql", "task": POSTGRES_TASK,
                                                     "response": "SELECT a FROM t"})
            assert result.status_code == 200, result.text
            body = result.json()
            assert body["verdict"] == "error" and body["reward"] == 0.0
            assert body["evidence"]["error_cause"] == "postgres_unconfigured"
            assert "Traceback" not in result.text
            metrics = client.get("/metrics").text
    finally:
        server.stop()
    counted = [line for line in metrics.splitlines()
               if line.startswith("assay_errors_total{") and 'cause="postgres_unconfigured"' in line]
    assert len(counted) == 1 and re.search(r"\s1(\.0)?$", counted[0]), metrics
