"""The `math` verifier: extract the final answer, parse and compare it in the sandbox."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sandboxes.base import Limits, RequestTimeout, entry
from sandboxes.resident import Answer, ResidentSpec, answer_all, close_resident_servers
from verifiers.base import Outcome, Probe, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, clip, hard
from verifiers.math import certify
from verifiers.math.detectors import claims_of, host_flags, with_false_steps
from verifiers.math.extract import Extraction, extract_answer, extract_gold
from verifiers.math.feedback import math_feedback
from verifiers.math.inside import check
from verifiers.registry import register

POOL = "math"
PRELOAD = (check.__name__,)
TARGET = entry(check.serve)
DEFAULT_MEMORY_MB = 1024
# More final answers than any task asks for: a hedge, refused before parsing.
MAX_CANDIDATES = 64
# Parsing answers runs only our own parser (no eval) on data, so warm sessions may judge
# answer after answer; each answer still gets its own time budget. A group's answers go to a
# session in one message (`parts`) and come back one frame each, each timed on its own.
SESSIONS = ResidentSpec(TARGET, "math_serve", PRELOAD,
                        Limits(wall_s=300, cpu_s=240, memory_mb=DEFAULT_MEMORY_MB, processes=4,
                               output_bytes=64_000, file_size_mb=1, open_files=64, scratch_mb=4),
                        max_age_s=60, max_requests=2000, wait_s=0.5, parts=True)


# (response index, request to the judge, evidence so far)
Pending = tuple[int, dict[str, Any], dict[str, Any]]


# Why nothing was taken, where a rule says more than "nothing found".
_NO_ANSWER = {"unclosed_box": "a box is left open: the response was cut inside its answer"}

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
    version = "2.7.0"
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
                reason = _NO_ANSWER.get(extraction.method, "no final answer found")
                outcomes[index] = Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                                          {**evidence, "reason": reason})
            else:
                pending.append((index, {**_request(task, gold, extraction), "claims": claims_of(response)}, evidence))
        # A group's responses often end in the same answer: each distinct request is judged once,
        # so equal answers in a group get one judgement (and one verdict) between them.
        keys = [json.dumps(request, sort_keys=True) for _, request, _ in pending]
        slot: dict[str, int] = {}  # a request's key -> its place among those judged
        requests: list[dict[str, Any]] = []
        for key, (_, request, _) in zip(keys, pending, strict=True):
            if key not in slot:
                slot[key] = len(requests)
                requests.append(request)
        answers = answer_all(ctx.sandbox, SESSIONS, requests, timeout_s=task.timeout_s,
                             fresh_limits=functools.partial(_limits, task), fresh_pool=POOL,
                             warm=task.memory_mb == DEFAULT_MEMORY_MB)
        for (index, _, evidence), key in zip(pending, keys, strict=True):
            outcomes[index] = self._answered(task, answers[slot[key]], evidence)
        for index, outcome in outcomes.items():
            outcome.add_flags(flags[index])
        return [outcomes[i] for i in range(len(responses))]

    def _answered(self, task: MathTask, answer: Answer, evidence: dict[str, Any]) -> Outcome:
        if answer.timed_out is not None:
            return _timed_out(task, evidence, answer.timed_out)
        if answer.died is not None:
            result = answer.died.result
            reason = (result.killed_by if result else None) or "parser process died"
            return Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False)],
                           {**evidence, "reason": f"resource limit while parsing: {reason}"},
                           flags=["math_parse_resource_limit"], usage=result.summary() if result else None)
        return self._outcome(answer.value, evidence)

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
