"""The `code` verifier: a model writes Python, hidden tests decide.

See docs/code_verifier.md for the design: candidate and tests run in separate sandboxed
processes from separate warm pools, and every call crosses as plain data through the
trusted host, so no response that does not solve the task can get reward.
"""

from __future__ import annotations

import functools
from typing import Any

from sandboxes.resident import close_resident_servers
from verifiers.base import (
    Component,
    Outcome,
    Probe,
    TaskBase,
    Verdict,
    Verifier,
    VerifyContext,
    clip,
    hard,
    sha256_text,
    soft,
)
from verifiers.code import certify, native, wire
from verifiers.code.detectors import DETECTOR_FLAGS, SCAN, code_flags, start_scan
from verifiers.code.extract import MAX_CODE_CHARS, STATIC_FLAGS, extract_code, static_flags
from verifiers.code.feedback import code_feedback
from verifiers.code.interactive import run_interactive
from verifiers.code.languages import LANGUAGES
from verifiers.code.runner import CANDIDATE_POOL, GRADER_POOL, RUN_FLAGS, TestRun, run_assert_test, run_io_case
from verifiers.code.task import CodeTask
from verifiers.registry import register

STDERR_EXCERPT = 1500
# Bytes taken from the end of stderr before decoding: room for multi-byte characters.
STDERR_TAIL_BYTES = STDERR_EXCERPT * 2


def _invalid_format(reason: str) -> Outcome:
    return Outcome(
        verdict=Verdict.invalid_format,
        components=[hard("format", False), hard("correctness", False), hard("compliance", True)],
        evidence={"format_error": reason},
    )


def _time_budget(task: CodeTask) -> float:
    """CPU seconds per test: the task's limit, times the language's time factor."""
    if task.language == "python":
        return task.time_limit_s
    return native.time_limits(task, LANGUAGES[task.language])[0]


def _resources(task: CodeTask, runs: list[TestRun], time_budget: float) -> float:
    """Share of the per-test budget left at the worst test (time or memory)."""
    if not runs:
        return 0.0
    worst_time = max(run.cpu_s for run in runs) / time_budget
    worst_memory = max(run.peak_memory_mb for run in runs) / task.memory_mb
    return 1.0 - max(worst_time, worst_memory)


def _verdict(runs: list[TestRun], violations: list[str]) -> Verdict:
    if violations:
        return Verdict.violation
    failing = [run for run in runs if run.status != "pass"]
    if not failing:
        return Verdict.correct
    if all(run.status == "timeout" for run in failing):
        return Verdict.timeout
    return Verdict.incorrect


@register
class CodeVerifier(Verifier):
    name = "code"
    version = "1.5.0"
    description = (
        "Code judged by hidden tests: Python with HumanEval-style check(candidate) or stdin/stdout "
        "cases (candidate and tests in separate sandboxed processes); C, C++, Java, JavaScript, Go "
        "and Rust compiled once and run on stdin/stdout cases, with optional testlib checkers."
    )
    task_model = CodeTask
    feedback = staticmethod(code_feedback)  # type: ignore[assignment]
    # Every flag this verifier can raise: a fixed vocabulary, so that nothing a response
    # does or says becomes a flag name (or a metric label).
    flag_names = STATIC_FLAGS | RUN_FLAGS | DETECTOR_FLAGS | {"violation"}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "languages": native.languages_info()}

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        return certify.probes(task)

    def time_budget_s(self, task: TaskBase) -> float | None:
        return certify.time_budget_s(task)

    def warm(self, ctx: VerifyContext) -> None:
        ctx.sandbox.warm(CANDIDATE_POOL, wire.CANDIDATE_PRELOAD)
        ctx.sandbox.warm(GRADER_POOL, wire.GRADER_PRELOAD)
        native.probe_versions_soon(ctx.sandbox)

    def close(self, ctx: VerifyContext) -> None:
        close_resident_servers(ctx.sandbox, SCAN.pool)

    def verify(self, task: CodeTask, response: str, ctx: VerifyContext) -> Outcome:  # type: ignore[override]
        code = extract_code(response, task.language)
        if code is None:
            label = "Python" if task.language == "python" else task.language
            return _invalid_format(f"no fenced {label} code block (```{task.language} ... ```) in the response")
        if len(code) > MAX_CODE_CHARS:
            return _invalid_format(f"code block longer than {MAX_CODE_CHARS} characters")
        if task.language != "python":
            return self._verify_compiled(task, code, ctx)
        program = f"{task.prompt}\n{code}" if task.prompt else code
        scan = start_scan(task, code, ctx)
        runs, planned = self._run_tests(task, program, ctx)
        outcome = self._outcome(task, code, runs, planned)
        outcome.add_flags(code_flags(task, scan, set(outcome.flag_map())))
        outcome.flags = [f for f in outcome.flags if f in self.flag_names]
        return outcome

    def _verify_compiled(self, task: CodeTask, code: str, ctx: VerifyContext) -> Outcome:
        """C, C++, Java, JavaScript, Go, Rust: compile once (a failure is the format's),
        then every case against the compiled program (verifiers/code/native.py)."""
        runs: list[TestRun] | None = None
        if task.interactor is None:
            # Compiled and run in one job where the source is new (native.compile_and_run).
            plan = self._plan(task)
            compiled, fresh, runs = native.compile_and_run(
                ctx.sandbox, task, code, plan,
                lambda: native.compile_checker(ctx.sandbox, task.checker) if task.checker is not None else None)
        else:
            compiled, fresh = native.compile_program(ctx.sandbox, task.language, code)
        compile_usage = {"compile_cpu_s": round(compiled.cpu_s, 4) if fresh else 0.0, "compile_cached": not fresh}
        if compiled.error:
            outcome = _invalid_format(compiled.error)
            outcome.evidence["compiler_message"] = compiled.message
            outcome.evidence["compile"] = compile_usage
            outcome.usage = compile_usage
            return outcome
        if runs is not None:
            planned = len(plan)
        else:
            checker = native.compile_checker(ctx.sandbox, task.checker) if task.checker is not None else None
            runs, planned = self._run_tests(task, code, ctx, compiled, checker)
        outcome = self._outcome(task, code, runs, planned)
        assert outcome.usage is not None
        outcome.usage.update(compile_usage)
        outcome.evidence["compile"] = compile_usage
        outcome.flags = [f for f in outcome.flags if f in self.flag_names]
        return outcome

    def _run_tests(self, task: CodeTask, program: str, ctx: VerifyContext, compiled: native.Compiled | None = None,
                   checker: native.Compiled | None = None) -> tuple[list[TestRun], int]:
        if compiled is None and task.checker is not None:
            checker = native.compile_checker(ctx.sandbox, task.checker)
        plan = self._plan(task)
        if compiled is not None and task.interactor is None:
            # Compiled programs: the cases in batches, one job each (native.run_cases).
            return native.run_cases(ctx.sandbox, task, compiled, checker, plan), len(plan)
        runs: list[TestRun] = []
        for name, hidden, spec in plan:
            if task.tests is not None:
                run = run_assert_test(ctx.sandbox, task, program, name, spec, hidden)
            elif task.interactor is not None:
                run = run_interactive(ctx.sandbox, task, program, compiled, name, spec, hidden)
            else:
                decide = None if checker is None else functools.partial(
                    native.judge_output, ctx.sandbox, task, checker, spec)
                run = run_io_case(ctx.sandbox, task, program, name, spec, hidden, decide)
            runs.append(run)
            # Without partial credit one failure decides; a violation always ends the run.
            if run.violations or (run.status != "pass" and not task.partial_credit):
                break
        return runs, len(plan)

    @staticmethod
    def _plan(task: CodeTask) -> list[tuple[str, bool, Any]]:
        """What runs, in order: (name, hidden, the assert test or the io case)."""
        plan: list[tuple[str, bool, Any]] = []
        if task.tests is not None:
            if task.visible_tests is not None:
                plan.append(("visible:check", False, task.visible_tests))
            plan.append(("check", True, task.tests))
        else:
            for index, case in enumerate(task.visible_io_cases or []):
                plan.append((case.name or f"visible[{index}]", False, case))
            for index, case in enumerate(task.io_cases or []):
                # A hidden case's own name could say too much: hidden cases go by index.
                plan.append((f"case[{index}]", True, case))
        return plan

    def _outcome(self, task: CodeTask, code: str, runs: list[TestRun], planned: int) -> Outcome:
        hidden_total = 1 if task.tests is not None else len(task.io_cases or [])
        violations = sorted({v for run in runs for v in run.violations})
        passed = sum(run.status == "pass" for run in runs)
        hidden_passed = sum(run.status == "pass" for run in runs if run.hidden)
        # A checker's points count for what they are (testlib's `points`, in [0, 1]).
        hidden_score = sum(1.0 if run.status == "pass" else run.score or 0.0 for run in runs if run.hidden)
        all_passed = passed == planned
        if task.partial_credit:
            # Soft, so that it scales the reward; format and compliance still gate it.
            correctness: Component = soft("correctness", hidden_score / hidden_total)
        else:
            correctness = hard("correctness", all_passed)
        components = [
            hard("format", True),
            correctness,
            hard("compliance", not violations),
            soft("resources", _resources(task, runs, _time_budget(task))),
        ]
        flags = static_flags(code) if task.language == "python" else []
        for run in runs:
            flags += sorted(run.flags)
        if violations:
            flags.append("violation")
        failing = next((run for run in runs if run.status != "pass"), None)
        evidence: dict[str, Any] = {
            "code_sha256": sha256_text(code),
            "tests": [run.evidence() for run in runs],
            "passed": passed,
            "total": planned,
            "hidden_passed": hidden_passed,
            "hidden_total": hidden_total,
        }
        if violations:
            evidence["violations"] = violations
        if failing is not None:
            if failing.stderr_safe:
                evidence["stderr"] = clip(failing.stderr[-STDERR_TAIL_BYTES:], STDERR_EXCERPT)
            elif failing.stderr:
                evidence["stderr"] = "(withheld: the candidate had hidden inputs and could echo them)"
        usage = {
            "tests_run": len(runs),
            "wall_s": round(sum(run.wall_s for run in runs), 4),
            "cpu_s": round(sum(run.cpu_s for run in runs), 4),
            "peak_memory_mb": round(max((run.peak_memory_mb for run in runs), default=0.0), 1),
            "killed_by": sorted({run.killed_by for run in runs if run.killed_by}),
            "limits": {"time_limit_s": task.time_limit_s, "memory_mb": task.memory_mb,
                       "output_bytes": task.output_limit_bytes},
            **({"language": task.language, "cpu_limit_s": round(_time_budget(task), 4)}
               if task.language != "python" else {}),
        }
        return Outcome(
            verdict=_verdict(runs, violations),
            components=components,
            evidence=evidence,
            flags=sorted(set(flags)),
            usage=usage,
        )
