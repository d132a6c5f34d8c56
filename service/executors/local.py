"""The local executor: threads of this process, on this process's own sandbox."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

from sandboxes.base import Sandbox
from service.executors.base import Judged, JudgeJob, gather_calls, run_verifier
from verifiers.base import VerifyContext


class LocalExecutor:
    """Threads of this process, at most `verify_threads` at once, on this process's sandbox.

    A call is handed to a thread pool of its own (`ThreadPoolExecutor`: a C queue, one
    future) rather than through `anyio.to_thread` (two extra turns of the event loop and a
    Python `Condition` a call, docs/benchmarks.md "Fifth pass"), with what anyio's hop kept:
    the caller's context variables go with the call (the request id in the log lines), and a
    cancelled caller still waits for its call to end (no thread outlives the in-flight budget
    that admitted it)."""

    def __init__(self, sandbox: Sandbox, threads: int, services: Mapping[str, str] | None = None) -> None:
        self.sandbox = sandbox
        self.services = dict(services or {})
        self.backend = sandbox.name
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="assay-verify")

    def context(self, reveal_hidden: bool = True) -> VerifyContext:
        return VerifyContext(self.sandbox, reveal_hidden, services=self.services)

    async def run(self, job: JudgeJob) -> list[Judged]:
        ctx = self.context(job.reveal_hidden)

        async def call(indexes: list[int]) -> list[Judged]:
            responses = [job.responses[i] for i in indexes]
            done = self._pool.submit(contextvars.copy_context().run, run_verifier, job.verifier, job.task,
                                     responses, ctx)
            with anyio.CancelScope(shield=True):  # as anyio.to_thread: the call ends before its caller does
                return await asyncio.wrap_future(done)

        return await gather_calls(job, call)

    def describe(self) -> dict[str, Any]:
        return {"executor": "local", **self.sandbox.describe()}

    def close(self) -> None:
        self.sandbox.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
