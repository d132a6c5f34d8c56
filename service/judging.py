"""Run a verifier over responses; every infrastructure failure becomes verdict `error`.

Plain functions with no store, no metrics and no event loop: the local executor calls
them in threads of the API process, and the Ray executor calls them inside Ray tasks on
the sandbox nodes. Either way the same rules decide the verdict.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sandboxes.base import SandboxBusy, SandboxError, SandboxUnavailable
from verifiers.base import Outcome, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, hard

log = logging.getLogger(__name__)

# Raised out of a verification instead of becoming an outcome: an invalid task is the
# caller's error (4xx, or its group's error), and a busy or missing sandbox means no work
# was done for the response, so the request is answered 503 + Retry-After and nothing is
# logged: retrying it loses nothing. Every other failure is verdict `error`.
NOT_AN_OUTCOME = (TaskInvalid, SandboxBusy, SandboxUnavailable)


@dataclass
class Judged:
    outcome: Outcome
    duration_ms: float


def calls_for(verifier: Verifier, count: int) -> list[list[int]]:
    """How a group of `count` responses is split into calls (lists of response indexes)."""
    if count == 0:
        return []
    # A verifier that judges groups shares sandbox set-up across them: one call per group.
    if verifier.judges_groups or count == 1:
        return [list(range(count))]
    return [[i] for i in range(count)]


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
    elif kind.startswith("executor"):
        message = "the executor failed to complete the verification; the cause is in the service log"
    else:
        message = f"the {verifier} verifier failed; the cause is in the service log"
    return Outcome(Verdict.error, [hard("correctness", False)],
                   {"error": kind, "error_cause": cause, "message": message}, flags=[kind])


def judge(verifier: Verifier, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Judged]:
    """Blocking: judge responses in one call; never raises for a response's own behaviour.
    TaskInvalid (the task itself is unusable) propagates: it is the caller's 4xx."""
    started = time.perf_counter()
    try:
        if verifier.judges_groups:
            outcomes = verifier.verify_many(task, responses, ctx)
            per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
            return [Judged(o, per) for o in outcomes]
        return [_judge_one(verifier, task, r, ctx) for r in responses]
    except NOT_AN_OUTCOME:
        raise
    except Exception as exc:  # infrastructure or verifier bug: reported, never a reward
        per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
        log.exception("verification failed in %s", verifier.name)
        return [Judged(error_outcome(error_kind(exc), exc, verifier.name), per) for _ in responses]


def _judge_one(verifier: Verifier, task: TaskBase, response: str, ctx: VerifyContext) -> Judged:
    started = time.perf_counter()
    try:
        outcome = verifier.verify(task, response, ctx)
    except NOT_AN_OUTCOME:
        raise
    except Exception as exc:
        log.exception("verification failed in %s", verifier.name)
        outcome = error_outcome(error_kind(exc), exc, verifier.name)
    return Judged(outcome, (time.perf_counter() - started) * 1000)
