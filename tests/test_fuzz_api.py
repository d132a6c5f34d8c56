"""Schemathesis against a live server on loopback, with a valid key: every operation,
then the stateful phase along the OpenAPI links (tasks, records, environment sessions).
No generated input may get a 5xx."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, LiveServer
from verifiers.tool_state.examples import transfer_task

EXAMPLES_PER_OPERATION = 10


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_generated_request_gets_a_server_error(tmp_path: Path):
    server = LiveServer(tmp_path)
    try:
        with server.client() as c:
            task = {"task_id": "fuzz/bank-transfer", "verifier": "tool_state", "task": transfer_task()}
            assert c.post("/v1/tasks", json=task).status_code == 201
        st = Path(sys.executable).with_name("st")
        run = subprocess.run(
            [str(st), "run", f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {server.admin_key}",
             "--checks", "not_a_server_error", "--phases", "examples,fuzzing,stateful",
             "--max-examples", str(EXAMPLES_PER_OPERATION), "--workers", "2", "--seed", "7",
             "--request-timeout", "60", "--no-color",
             # Registered task ids are free text (`{task_id:path}`): most generated ids are fine.
             "--suppress-health-check", "filter_too_much"],
            cwd=tmp_path, capture_output=True, text=True, timeout=540,  # its cache stays out of the tree
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(REPO),
                 "ASSAY_FUZZ_ENV_TASK": "fuzz/bank-transfer", "ASSAY_FUZZ_KEY_ID": server.admin_key.split("_")[1]},
        )
        summary = run.stdout[-4000:]
        cases = re.search(r"(\d+) generated", summary)
        print(summary)
        assert cases is not None and int(cases.group(1)) > 0, summary
        assert "Server error" not in run.stdout and run.returncode == 0, summary
        # The stateful phase reached the operations behind ids: environment sessions were
        # finished (tool_state records) and verified records were read back.
        with server.client() as c:
            assert c.get("/v1/records", params={"verifier": "tool_state", "limit": 1}).json()["records"]
        log = server.log_path.read_text()
        assert "Traceback" not in log, log[-3000:]
    finally:
        server.stop()
