"""The executor contract: what the pipeline's judge stage hands an executor, what it gets
back, and the verdict rules every executor applies the same way.

An executor takes a `JudgeJob` (one group's task and responses) and returns one `Judged`
per response, in order. It never raises for a response's own behaviour, and it turns its
own failures (a verifier bug, a crashed sandbox, a lost Ray node, a timeout) into verdict
`error` before it returns. Only three things leave it as exceptions (`NOT_AN_OUTCOME`):
`TaskInvalid` (the task itself is unusable: the caller's 4xx, or its group's error) and
`SandboxBusy` / `SandboxUnavailable` (no work was done: the request is answered 503 +
Retry-After and nothing is logged, so retrying it loses nothing). That saturation rule is
the same for every executor, local or Ray.

Plain functions, no store, no metrics, no event loop: the local executor calls
`run_verifier` in threads of the API process, the Ray executor inside Ray tasks on the
sandbox nodes (`ray_node.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sandboxes.base import SandboxBusy, SandboxError, SandboxUnavailable
from verifiers.base import ContractBreach, Outcome, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, hard

log = logging.getLogger(__name__)

NOT_AN_OUTCOME = (TaskInvalid, SandboxBusy, SandboxUnavailable)


@dataclass(frozen=True)
class JudgeJob:
    """One group's verification: what a verifier needs, as parsed objects and as plain data."""

    verifier: Verifier
    task: TaskBase
    raw_task: dict[str, Any]
    responses: list[str]
    # False for registered tasks: their hidden fields must not reach evidence in clear.
    reveal_hidden: bool


@dataclass(frozen=True)
class Judged:
    """One response's outcome as the verifier gave it, and how long its verification took."""

    outcome: Outcome
    duration_ms: float


class Executor(Protocol):
    """Where verification runs. `backend` is what records name as their sandbox backend."""

    backend: str

    async def run(self, job: JudgeJob) -> list[Judged]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def calls_for(verifier: Verifier, count: int) -> list[list[int]]:
    """How a group of `count` responses is split into calls (lists of response indexes)."""
    if count == 0:
        return []
    # A verifier that checks groups shares sandbox set-up across them: one call per group.
    if verifier.judges_groups or count == 1:
        return [list(range(count))]
    return [[i] for i in range(count)]


async def gather_calls(job: JudgeJob, run: Callable[[list[int]], Awaitable[list[Judged]]]) -> list[Judged]:
    """Split a group into calls (see `calls_for`), run them concurrently with
    `run(indexes) -> list[Judged]`, and put the results back in response order."""
    calls = calls_for(job.verifier, len(job.responses))
    if len(calls) == 1:  # one call (a group a verifier judges together): no task to gather
        return await run(calls[0])
    parts = await asyncio.gather(*(run(indexes) for indexes in calls))
    out: list[Judged | None] = [None] * len(job.responses)
    for indexes, judged in zip(calls, parts, strict=True):
        for i, one in zip(indexes, judged, strict=True):
            out[i] = one
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, SandboxBusy):
        return "sandbox_busy"
    return "sandbox_error" if isinstance(exc, SandboxError) else "verifier_error"


def error_outcome(kind: str, exc: BaseException, verifier: str) -> Outcome:
    """The outcome of a response whose verification failed for a reason not its own."""
    # A stable word for the part that failed. Sandbox messages are ours, never a job's text;
    # other exception text can quote hidden task data, so it goes to the log only.
    cause = getattr(exc, "cause", None) or ("executor_failed" if kind.startswith("executor") else "verifier_failed")
    if isinstance(exc, SandboxError):
        message = str(exc)[:500]
    elif isinstance(exc, ContractBreach):
        message = (f"the {verifier} verifier returned numbers outside the reward contract (components in [0, 1], "
                   "finite numbers in evidence); the cause is in the service log")
    elif kind.startswith("executor"):
        message = "the executor failed to complete the verification; the cause is in the service log"
    else:
        message = f"the {verifier} verifier failed; the cause is in the service log"
    return Outcome(Verdict.error, [hard("correctness", False)],
                   {"error": kind, "error_cause": cause, "message": message}, flags=[kind])


def failed_calls(job: JudgeJob, indexes: list[int], kind: str, exc: BaseException) -> list[Judged]:
    """Verdict `error` for every response of a call the executor could not complete."""
    if isinstance(exc, NOT_AN_OUTCOME):
        raise exc
    log.warning("executor failed a %s call of %d responses: %s", job.verifier.name, len(indexes), exc)
    return [Judged(error_outcome(kind, exc, job.verifier.name), 0.0) for _ in indexes]


def run_verifier(verifier: Verifier, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Judged]:
    """Blocking: verify responses in one call; never raises for a response's own behaviour,
    only `NOT_AN_OUTCOME` propagates."""
    started = time.perf_counter()
    try:
        if verifier.judges_groups:
            outcomes = verifier.verify_many(task, responses, ctx)
            per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
            return [Judged(within_contract(o, verifier.name), per) for o in outcomes]
        return [_verify_one(verifier, task, r, ctx) for r in responses]
    except NOT_AN_OUTCOME:
        raise
    except Exception as exc:  # infrastructure or verifier bug: reported, never a reward
        per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
        log.exception("verification failed in %s", verifier.name)
        return [Judged(error_outcome(error_kind(exc), exc, verifier.name), per) for _ in responses]


def _verify_one(verifier: Verifier, task: TaskBase, response: str, ctx: VerifyContext) -> Judged:
    started = time.perf_counter()
    try:
        outcome = verifier.verify(task, response, ctx)
    except NOT_AN_OUTCOME:
        raise
    except Exception as exc:
        log.exception("verification failed in %s", verifier.name)
        outcome = error_outcome(error_kind(exc), exc, verifier.name)
    return Judged(within_contract(outcome, verifier.name), (time.perf_counter() - started) * 1000)


def within_contract(outcome: Outcome, verifier: str) -> Outcome:
    """The outcome, or verdict `error` when the verifier broke the reward contract's numbers
    (they would become a reward, or a record no store can hold)."""
    breach = outcome.contract_breach()
    if breach is None:
        return outcome
    log.error("the %s verifier broke the reward contract: %s", verifier, breach)
    return error_outcome("verifier_error", ContractBreach(breach), verifier)
