"""Where verification runs: `local` (threads of this process, its own sandbox) or `ray`
(plain Ray tasks on sandbox nodes). The engine awaits either the same way; both return
one `Judged` per response, in order, and only the engine writes records."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from sandboxes.base import Sandbox
from service.config import Settings
from service.judging import Judged, calls_for, error_outcome, judge
from verifiers.base import TaskBase, TaskInvalid, Verifier, VerifyContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeJob:
    """One group's verification: what a verifier needs, as parsed objects and as plain data."""

    verifier: Verifier
    task: TaskBase
    raw_task: dict[str, Any]
    responses: list[str]
    # False for registered tasks: their hidden fields must not reach evidence in clear.
    reveal_hidden: bool


class Executor(Protocol):
    backend: str  # what records name as their sandbox backend

    async def judge(self, job: JudgeJob) -> list[Judged]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


async def gather_calls(job: JudgeJob, run: Any) -> list[Judged]:
    """Split a group into calls (see `calls_for`), run them concurrently with
    `run(indexes) -> list[Judged]`, and put the results back in response order."""
    calls = calls_for(job.verifier, len(job.responses))
    parts = await asyncio.gather(*(run(indexes) for indexes in calls))
    out: list[Judged | None] = [None] * len(job.responses)
    for indexes, judged in zip(calls, parts, strict=True):
        for i, one in zip(indexes, judged, strict=True):
            out[i] = one
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]


class LocalExecutor:
    """Threads of this process, bounded by `verify_threads`, on this process's sandbox."""

    def __init__(self, sandbox: Sandbox, threads: int, services: Mapping[str, str] | None = None) -> None:
        self.sandbox = sandbox
        self.services = dict(services or {})
        self.backend = sandbox.name
        self._limiter = anyio.CapacityLimiter(threads)

    def judge_now(self, job: JudgeJob) -> list[Judged]:
        """Blocking, in the calling thread (CLI and replay)."""
        return judge(job.verifier, job.task, job.responses, self._context(job))

    def _context(self, job: JudgeJob) -> VerifyContext:
        return VerifyContext(self.sandbox, job.reveal_hidden, services=self.services)

    async def judge(self, job: JudgeJob) -> list[Judged]:
        ctx = self._context(job)

        async def run(indexes: list[int]) -> list[Judged]:
            responses = [job.responses[i] for i in indexes]
            return await anyio.to_thread.run_sync(judge, job.verifier, job.task, responses, ctx,
                                                  limiter=self._limiter)

        return await gather_calls(job, run)

    def describe(self) -> dict[str, Any]:
        return {"executor": "local", **self.sandbox.describe()}

    def close(self) -> None:
        self.sandbox.close()


def create_executor(settings: Settings) -> Executor:
    if settings.executor == "ray":
        try:
            from service.ray_executor import RayExecutor
        except ModuleNotFoundError as exc:
            raise RuntimeError("ASSAY_EXECUTOR=ray needs Ray: pip install .[service,ray]") from exc
        return RayExecutor(settings)
    from service.config import build_sandbox

    sandbox = build_sandbox(settings)
    return LocalExecutor(sandbox, settings.verify_threads, settings.verifier_services)


def failed_calls(job: JudgeJob, indexes: list[int], kind: str, exc: BaseException) -> list[Judged]:
    """Verdict `error` for every response of a call the executor could not complete."""
    if isinstance(exc, TaskInvalid):
        raise exc
    log.warning("executor failed a %s call of %d responses: %s", job.verifier.name, len(indexes), exc)
    return [Judged(error_outcome(kind, exc, job.verifier.name), 0.0) for _ in indexes]
