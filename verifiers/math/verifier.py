"""The `math` verifier: extract the final answer, parse and compare it in the sandbox."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sandboxes.base import CallEnded, CallSession, Limits, RequestTimeout
from sandboxes.resident import ResidentSpec, close_resident_servers, resident_servers
from verifiers.base import Outcome, Probe, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, clip, hard
from verifiers.math import certify
from verifiers.math.detectors import claims_of, host_flags, with_false_steps
from verifiers.math.extract import Extraction, extract_answer, extract_gold
from verifiers.math.feedback import math_feedback
from verifiers.registry import register

POOL = "math"
PRELOAD = ("verifiers.math.judge",)
TARGET = "verifiers.math.judge:serve"
DEFAULT_MEMORY_MB = 1024
# More final answers than any task asks for: a hedge, refused before parsing.
MAX_CANDIDATES = 64
# Parsing answers runs only our own parser (no eval) on data, so warm sessions may judge
# answer after answer; each answer still gets its own time budget.
SESSIONS = ResidentSpec(TARGET, "math_serve", PRELOAD,
                        Limits(wall_s=300, cpu_s=240, memory_mb=DEFAULT_MEMORY_MB, processes=4,
                               output_bytes=64_000, file_size_mb=1, open_files=64, scratch_mb=4),
                        max_age_s=60, max_requests=2000, wait_s=0.5)


# (response index, request to the judge, evidence so far)
Pending = tuple[int, dict[str, Any], dict[str, Any]]


class MathTask(TaskBase):
    # The gold is hidden: a registered held-out set is not readable by trainer keys.
    hidden_fields: ClassVar[frozenset[str]] = frozenset({"answer"})

    answer: str = Field(min_length=1, max_length=2000, description="The gold answer (LaTeX or plain text).")
    last_number_fallback: bool = Field(
        True, description="When no \\boxed{} or answer phrase is found, take the response's last number."
    )
    percent: Literal["literal", "fraction", "either"] = Field(
        "either", description="How a value written with % compares: 'literal' (28% is 28), 'fraction' "
        "(28% is 0.28) or 'either' (both readings; the default).")
    named_values: bool = Field(
        True, description="Whether 'x = 3' (a name, function or label equal to a constant) may stand for the "
        "value 3. When false it is an equation, equal only to an equivalent equation.")
    several_answers: bool | None = Field(
        None, description="Whether the task asks for several values (a set, a tuple, all solutions). "
        "Default: decided by the gold (a list, a set or a ± asks for several). When one value is asked, "
        "several different final answers are a hedge: verdict invalid_format, flag multiple_answers.")
    require_units: bool = Field(False, description="Compare the unit words after a value; by default units are "
                                "stripped.")
    choices: dict[str, str] | None = Field(
        None, description="Multiple choice: letter -> value (e.g. {\"A\": \"8\", \"C\": \"12\"}). Then a letter "
        "and its value match each other; without it a letter matches a letter and a value a value.")
    form: Literal["lowest_terms", "prime_factorization", "scientific", "integer"] | None = Field(
        None, description="A form the answer must be written in, besides having the gold's value: a fraction in "
        "lowest terms, a prime factorization, scientific notation, an integer. Default: any form of an equal value.")
    significant_figures: int | None = Field(
        None, ge=1, le=30, description="With form 'scientific': the significant figures the mantissa must have.")
    timeout_s: float = Field(5.0, gt=0, le=30, description="Time budget to parse and compare one answer.")
    memory_mb: int = Field(DEFAULT_MEMORY_MB, ge=256, le=4096)


    hashed_when_set: ClassVar[frozenset[str]] = TaskBase.hashed_when_set | {"choices", "form", "significant_figures"}

    @model_validator(mode="after")
    def _figures_with_scientific(self) -> MathTask:
        if self.significant_figures is not None and self.form != "scientific":
            raise ValueError("significant_figures goes with form 'scientific'")
        return self

    @field_validator("choices")
    @classmethod
    def _choice_letters(cls, choices: dict[str, str] | None) -> dict[str, str] | None:
        if choices is None:
            return None
        if not 1 <= len(choices) <= 26:
            raise ValueError("give between 1 and 26 choices")
        out = {}
        for letter, value in choices.items():
            if not re.fullmatch(r"[A-Za-z]", letter.strip()):
                raise ValueError(f"a choice is named by one letter, not {letter[:20]!r}")
            if not value.strip() or len(value) > 500:
                raise ValueError(f"choice {letter!r} needs a value of 1 to 500 characters")
            out[letter.strip().upper()] = value
        return out


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
    version = "2.1.0"
    description = "Final-answer math: \\boxed{}/answer-phrase extraction, exact sympy comparison without eval."
    task_model = MathTask
    feedback = staticmethod(math_feedback)  # type: ignore[assignment]

    def reference(self, task: TaskBase, supplied: str | None) -> str | None:
        return supplied or certify.reference(task)

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        return certify.probes(task)

    def time_budget_s(self, task: TaskBase) -> float | None:
        return task.timeout_s  # type: ignore[attr-defined]
    judges_groups = True

    def warm(self, ctx: VerifyContext) -> None:
        ctx.sandbox.warm(SESSIONS.pool, PRELOAD)

    def close(self, ctx: VerifyContext) -> None:
        close_resident_servers(ctx.sandbox, SESSIONS.pool)

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_many(task, [response], ctx)[0]

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        assert isinstance(task, MathTask)
        outcomes: dict[int, Outcome] = {}
        pending: list[Pending] = []
        gold = extract_gold(task.answer)
        flags: dict[int, list[Any]] = {}
        for index, response in enumerate(responses):
            extraction = extract_answer(response, task.last_number_fallback)
            flags[index] = host_flags(response, extraction.text, task.prompt)
            evidence = _extraction_evidence(extraction, gold)
            if len(extraction.candidates) > MAX_CANDIDATES:
                outcomes[index] = Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                                          {**evidence, "reason": f"more than {MAX_CANDIDATES} final answers"},
                                          flags=["multiple_answers"])
            elif extraction.text is None:
                outcomes[index] = Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                                          {**evidence, "reason": "no final answer found"})
            else:
                pending.append((index, {**_request(task, gold, extraction), "claims": claims_of(response)}, evidence))
        if task.memory_mb == DEFAULT_MEMORY_MB:
            pending = self._judge_warm(task, pending, outcomes, ctx)
        # What no warm session could judge: fresh processes, which also pin a kill on its cause.
        while pending:
            session = ctx.sandbox.open(TARGET, None, _limits(task, len(pending)), pool=POOL, preload=PRELOAD)
            pending = self._judge_in(session, task, pending, outcomes)
        for index, outcome in outcomes.items():
            outcome.add_flags(flags[index])
        return [outcomes[i] for i in range(len(responses))]

    def _judge_warm(self, task: MathTask, pending: list[Pending],
                    outcomes: dict[int, Outcome], ctx: VerifyContext) -> list[Pending]:
        sessions = resident_servers(ctx.sandbox, SESSIONS)
        rest = []
        for item in pending:
            index, answer, evidence = item
            try:
                result = sessions.request(answer, timeout_s=task.timeout_s)
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

    def _judge_in(self, session: CallSession, task: MathTask, pending: list[Pending],
                  outcomes: dict[int, Outcome]) -> list[Pending]:
        """Judge answers in one sandboxed process until done or it dies; return the rest."""
        for position, (index, answer, evidence) in enumerate(pending):
            try:
                result = session.request(answer, timeout_s=task.timeout_s)
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
        if status == "choices_unparsable":
            raise TaskInvalid(f"task.choices: a choice's value cannot be parsed ({result.get('message')})")
        evidence = {**evidence, **{k: result[k] for k in ("answer_normalised", "gold_normalised", "how")
                                   if k in result}}
        if status == "compared":
            equal = bool(result.get("equal"))
            outcome = Outcome(Verdict.correct if equal else Verdict.incorrect,
                              [hard("format", True), hard("correctness", equal)], evidence)
            return with_false_steps(outcome, result.get("claims"))
        if status == "multiple_answers":
            return Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                           {**evidence, "reason": clip(str(result.get("message")), 300),
                            "candidates": result.get("candidates")}, flags=["multiple_answers"])
        flags = ["math_answer_too_large"] if status == "too_large" else []
        return Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                       {**evidence, "reason": clip(str(result.get("message")), 300)}, flags=flags)


def _extraction_evidence(extraction: Extraction, gold: Extraction) -> dict[str, Any]:
    evidence: dict[str, Any] = {"extracted": clip(extraction.text, 500) if extraction.text else None,
                                "extraction": extraction.method}
    if gold.method != "as_given":
        # The gold was a worked solution: say what was taken from it, and how.
        evidence["gold_extracted"] = clip(gold.text or "", 500)
        evidence["gold_extraction"] = gold.method
    return evidence


def _request(task: MathTask, gold: Extraction, extraction: Extraction) -> dict[str, Any]:
    return {"candidates": extraction.candidates, "gold": task.answer, "gold_candidates": gold.candidates,
            "percent": task.percent, "named_values": task.named_values,
            "several_answers": task.several_answers, "require_units": task.require_units, "choices": task.choices,
            "form": task.form, "significant_figures": task.significant_figures}


def _timed_out(task: MathTask, evidence: dict[str, Any], exc: RequestTimeout) -> Outcome:
    return Outcome(Verdict.timeout, [hard("format", False), hard("correctness", False)],
                   {**evidence, "reason": f"parsing took longer than {task.timeout_s}s"},
                   flags=["math_parse_timeout"], usage=exc.result.summary() if exc.result else None)
