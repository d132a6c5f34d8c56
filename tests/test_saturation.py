"""Saturation is a 503 the trainer can retry, never a reward: when no sandbox worker
comes free in time, the engine raises SandboxBusy (the app answers 503 + Retry-After)
and logs nothing for that request, while the request holding the worker is unharmed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sandboxes.base import SandboxBusy
from sandboxes.process import ProcessSandbox
from service.auth import Caller
from service.config import Settings
from service.engine import Engine
from service.metrics import Metrics
from service.schemas import GroupsRequest, VerifyRequest
from service.store import AuditStore

TASK = {"language": "python", "io_cases": [{"stdin": "", "stdout": "1\n"}]}
SLOW = "```python\nimport time\ntime.sleep(3)\nprint(1)\n```"
FAST = "```python\nprint(1)\n```"
CALLER = Caller("saturation-test", frozenset({"reward"}))


@pytest.mark.slow
def test_no_free_sandbox_worker_is_busy_not_error_and_logs_nothing(tmp_path: Path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'audit.db'}")
    store = AuditStore(settings.database_url)
    sandbox = ProcessSandbox(workers=1, acquire_timeout_s=0.5)
    engine = Engine(settings, store, sandbox, Metrics())
    outcome: dict[str, object] = {}

    async def holder() -> None:
        req = GroupsRequest.model_validate({"groups": [{"verifier": "code", "task": TASK, "responses": [SLOW]}]})
        outcome["holder"] = await engine.groups(req, CALLER)

    async def latecomer() -> None:
        await anyio.sleep(1.5)  # the holder's candidate is running by now
        req = VerifyRequest(verifier="code", task=TASK, response=FAST)
        try:
            outcome["latecomer"] = await engine.verify(req, CALLER)
        except SandboxBusy as exc:
            outcome["latecomer"] = exc

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            tg.start_soon(latecomer)

    try:
        anyio.run(both)
        assert isinstance(outcome["latecomer"], SandboxBusy), outcome["latecomer"]
        held = outcome["holder"].groups[0].results[0]  # type: ignore[union-attr]
        assert held.verdict == "correct" and held.reward == 1.0
        records = store.query(limit=10)
        assert [r.id for r in records] == [held.record_id]
        # Once the worker is free, the retry is verified and logged like any request.
        retried = anyio.run(engine.verify, VerifyRequest(verifier="code", task=TASK, response=FAST), CALLER)
        assert retried.verdict == "correct" and len(store.query(limit=10)) == 2
    finally:
        sandbox.close()
        store.engine.dispose()

