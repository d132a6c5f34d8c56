"""The local executor: threads of this process, on this process's own sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from sandboxes.base import Sandbox
from service.executors.base import Judged, JudgeJob, gather_calls, run_verifier
from verifiers.base import VerifyContext


class LocalExecutor:
    """Threads of this process, bounded by `verify_threads`, on this process's sandbox."""

    def __init__(self, sandbox: Sandbox, threads: int, services: Mapping[str, str] | None = None) -> None:
        self.sandbox = sandbox
        self.services = dict(services or {})
        self.backend = sandbox.name
        self._limiter = anyio.CapacityLimiter(threads)

    def context(self, reveal_hidden: bool = True) -> VerifyContext:
        return VerifyContext(self.sandbox, reveal_hidden, services=self.services)

    async def run(self, job: JudgeJob) -> list[Judged]:
        ctx = self.context(job.reveal_hidden)

        async def call(indexes: list[int]) -> list[Judged]:
            responses = [job.responses[i] for i in indexes]
            return await anyio.to_thread.run_sync(run_verifier, job.verifier, job.task, responses, ctx,
                                                  limiter=self._limiter)

        return await gather_calls(job, call)

    def describe(self) -> dict[str, Any]:
        return {"executor": "local", **self.sandbox.describe()}

    def close(self) -> None:
        self.sandbox.close()
