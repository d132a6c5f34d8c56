"""Stage 3, judge: hand each group to the executor as a `JudgeJob`, all groups at once.

The executor (service/executors/) returns one `Judged` per response and turns its own
failures into verdict `error`. A task found invalid while verifying fails its own group
only (`GroupError`; for a single verification, the request's 422). A busy or missing
sandbox aborts the whole request: 503 + Retry-After, nothing logged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from service.executors.base import Executor, Judged, JudgeJob
from service.pipeline.resolve import Resolved, ResolvedGroup, caller_facing
from service.pipeline.work import Work
from service.schemas import GroupError
from verifiers.base import TaskInvalid

T = TypeVar("T")


def job_for(resolved: Resolved, responses: list[str]) -> JudgeJob:
    # Evidence is the full audit view for every task: what a caller is shown of it is
    # chosen in service/views.py, from the feedback.
    return JudgeJob(resolved.verifier, resolved.task, resolved.raw, responses, reveal_hidden=True)


async def judge_one(executor: Executor, resolved: Resolved, responses: list[str]) -> list[Judged]:
    """One task's responses; an invalid task is raised in the caller's words."""
    try:
        return await executor.run(job_for(resolved, responses))
    except TaskInvalid as exc:
        raise caller_facing(resolved, exc) from None


async def judge(executor: Executor, work: Work, groups: list[ResolvedGroup]) -> list[list[Judged] | GroupError]:
    def group(index: int) -> Callable[[], Awaitable[list[Judged] | GroupError]]:
        resolved = groups[index].resolved

        async def run() -> list[Judged] | GroupError:
            texts = [g.text for g in groups[index].generations]
            if work.single:
                return await judge_one(executor, resolved, texts)
            try:
                return await executor.run(job_for(resolved, texts))
            except TaskInvalid as exc:
                shown = caller_facing(resolved, exc)
                return GroupError(index=index, field=f"groups[{index}].{shown.field}", message=str(shown))
        return run

    if len(groups) == 1:  # nothing to run alongside: no task group
        return [await group(0)()]
    return await gather_or_abort([group(i) for i in range(len(groups))])


async def gather_or_abort(calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run calls concurrently; the first one that raises cancels the rest and its
    exception is raised as itself (not wrapped in an ExceptionGroup)."""
    results: list[Any] = [None] * len(calls)
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def run(i: int) -> None:
            nonlocal failure
            try:
                results[i] = await calls[i]()
            except Exception as exc:
                if failure is None:
                    failure = exc
                tg.cancel_scope.cancel()

        for i in range(len(calls)):
            tg.start_soon(run, i)
    if failure is not None:
        raise failure
    return results
