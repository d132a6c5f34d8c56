"""The `math` verifier: extract the final answer, parse and compare it in the sandbox."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sandboxes.base import CallEnded, CallSession, Limits, RequestTimeout
from sandboxes.sessions import SessionSpec, close_warm_sessions, warm_sessions
from verifiers.base import Outcome, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, clip, hard
from verifiers.math.detectors import claims_of, host_flags, with_false_steps
from verifiers.math.extract import extract_answer
from verifiers.registry import register

POOL = "math"
PRELOAD = ("verifiers.math.judge",)
TARGET = "verifiers.math.judge:serve"
DEFAULT_MEMORY_MB = 1024
# Parsing answers runs only our own parser (no eval) on data, so warm sessions may judge
# answer after answer; each answer still gets its own time budget.
SESSIONS = SessionSpec(TARGET, "math_serve", PRELOAD,
                       Limits(wall_s=300, cpu_s=240, memory_mb=DEFAULT_MEMORY_MB, processes=4,
                              output_bytes=64_000, file_size_mb=1, open_files=64, scratch_mb=4),
                       max_age_s=60, max_requests=2000, wait_s=0.5)


class MathTask(TaskBase):
    answer: str = Field(min_length=1, max_length=2000, description="The gold answer (LaTeX or plain text).")
    last_number_fallback: bool = Field(
        True, description="When no \\boxed{} or answer phrase is found, take the response's last number."
    )
    timeout_s: float = Field(5.0, gt=0, le=30, description="Time budget to parse and compare one answer.")
    memory_mb: int = Field(DEFAULT_MEMORY_MB, ge=256, le=4096)


def _limits(task: MathTask, answers: int) -> Limits:
    return Limits(
        wall_s=task.timeout_s * answers + 5,
        cpu_s=task.timeout_s * answers + 5,
        memory_mb=task.memory_mb,
        processes=4,
        output_bytes=64_000,
        file_size_mb=1,
        open_files=64,
        scratch_mb=4,
    )


@register
class MathVerifier(Verifier):
    name = "math"
    version = "1.0.0"
    description = "Final-answer math: \\boxed{}/answer-phrase extraction, exact sympy comparison without eval."
    task_model = MathTask

    def warm(self, ctx: VerifyContext) -> None:
        ctx.sandbox.warm(SESSIONS.pool, PRELOAD)

    def close(self, ctx: VerifyContext) -> None:
        close_warm_sessions(ctx.sandbox, SESSIONS.pool)

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_many(task, [response], ctx)[0]

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        assert isinstance(task, MathTask)
        outcomes: dict[int, Outcome] = {}
        pending: list[tuple[int, str, dict[str, Any]]] = []
        claims: dict[int, list[list[str]]] = {}
        flags: dict[int, list[Any]] = {}
        for index, response in enumerate(responses):
            extraction = extract_answer(response, task.last_number_fallback)
            flags[index] = host_flags(response, extraction.text, task.prompt)
            claims[index] = claims_of(response) if extraction.text is not None else []
            evidence = {"extracted": clip(extraction.text, 500) if extraction.text else None,
                        "extraction": extraction.method}
            if extraction.text is None:
                outcomes[index] = Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                                          {**evidence, "reason": "no final answer found"})
            else:
                pending.append((index, extraction.text, evidence))
        if task.memory_mb == DEFAULT_MEMORY_MB:
            pending = self._judge_warm(task, pending, outcomes, ctx, claims)
        # What no warm session could judge: fresh processes, which also pin a kill on its cause.
        while pending:
            session = ctx.sandbox.open(TARGET, None, _limits(task, len(pending)), pool=POOL, preload=PRELOAD)
            pending = self._judge_in(session, task, pending, outcomes, claims)
        for index, outcome in outcomes.items():
            outcome.add_flags(flags[index])
        return [outcomes[i] for i in range(len(responses))]

    def _judge_warm(self, task: MathTask, pending: list[tuple[int, str, dict[str, Any]]],
                    outcomes: dict[int, Outcome], ctx: VerifyContext,
                    claims: dict[int, list[list[str]]]) -> list[tuple[int, str, dict[str, Any]]]:
        sessions = warm_sessions(ctx.sandbox, SESSIONS)
        rest = []
        for item in pending:
            index, answer, evidence = item
            try:
                result = sessions.request({"answer": answer, "gold": task.answer, "claims": claims[index]},
                                          timeout_s=task.timeout_s)
            except RequestTimeout as exc:
                outcomes[index] = _timed_out(task, evidence, exc)
                continue
            except CallEnded:  # the session's own limits may have ended it: judge afresh
                result = None
            if result is None:
                rest.append(item)
            else:
                outcomes[index] = self._outcome(result, evidence)
        return rest

    def _judge_in(self, session: CallSession, task: MathTask, pending: list[tuple[int, str, dict[str, Any]]],
                  outcomes: dict[int, Outcome],
                  claims: dict[int, list[list[str]]]) -> list[tuple[int, str, dict[str, Any]]]:
        """Judge answers in one sandboxed process until done or it dies; return the rest."""
        for position, (index, answer, evidence) in enumerate(pending):
            try:
                result = session.request({"answer": answer, "gold": task.answer, "claims": claims[index]},
                                         timeout_s=task.timeout_s)
            except RequestTimeout as exc:
                outcomes[index] = _timed_out(task, evidence, exc)
                return pending[position + 1:]
            except CallEnded as exc:
                usage = exc.result.summary() if exc.result else None
                reason = (exc.result.killed_by if exc.result else None) or "parser process died"
                outcomes[index] = Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                                          {**evidence, "reason": f"resource limit while parsing: {reason}"},
                                          flags=["math_parse_resource_limit"], usage=usage)
                return pending[position + 1:]
            outcomes[index] = self._outcome(result, evidence)
        session.finish()
        return []

    @staticmethod
    def _outcome(result: Any, evidence: dict[str, Any]) -> Outcome:
        if not isinstance(result, dict):
            raise TaskInvalid("math judge returned no result")
        status = result.get("status")
        if status == "gold_unparsable":
            raise TaskInvalid(f"task.answer: the gold answer cannot be parsed ({result.get('message')})")
        evidence = {**evidence, **{k: result[k] for k in ("answer_normalised", "gold_normalised", "how")
                                   if k in result}}
        if status == "compared":
            equal = bool(result.get("equal"))
            outcome = Outcome(Verdict.correct if equal else Verdict.incorrect,
                              [hard("format", True), hard("correctness", equal)], evidence)
            return with_false_steps(outcome, result.get("claims"))
        flags = ["math_answer_too_large"] if status == "too_large" else []
        return Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                       {**evidence, "reason": clip(str(result.get("message")), 300)}, flags=flags)


def _timed_out(task: MathTask, evidence: dict[str, Any], exc: RequestTimeout) -> Outcome:
    return Outcome(Verdict.timeout, [hard("format", False), hard("correctness", False)],
                   {**evidence, "reason": f"parsing took longer than {task.timeout_s}s"},
                   flags=["math_parse_timeout"], usage=exc.result.summary() if exc.result else None)
