"""Interactive problems: the task's interactor and the candidate talk over crossed pipes.

Each case runs the interactor and the candidate's program at once, each in a sandbox of
its own (`Sandbox.interact`): what one writes to stdout the other reads on stdin, relayed
through the trusted host. The interactor follows testlib's conventions: it is called as
`interactor input.txt output.txt answer.txt` with the case's `stdin` as its input file and
the case's `stdout` as its answer file (the candidate sees neither), and its exit code
decides: 0 accepted, 1 wrong answer, 2 presentation error, 3 the interactor failed,
4 "dirt" (presentation), 7 partial with points, 8 unexpected end of the candidate's output.

What a judge does with the two outcomes, in this order:
1. An interactor that failed (exit 3, any exit code outside the list, a signal, a kill by
   its own limits) makes the verdict `error` (InteractorFailed), whatever the candidate
   did: nothing the candidate writes, closes or kills can turn that into its success.
2. A candidate stopped by its limits: time (CPU, or wall while it idles: the idleness
   limit) is `timeout`, memory or output as for every other code test.
3. The interactor's verdict: anything but 0 fails the case.
4. Accepted by the interactor, the candidate must also have exited with 0 (else a
   runtime error).
The interactor's own output and stderr never reach the evidence (they may quote the
hidden input or answer); only a fixed word for its verdict does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sandboxes.base import Job, JobResult, Limits, Sandbox, SandboxError
from verifiers.base import TaskInvalid
from verifiers.code.runner import TestRun, _absorb, candidate_limits
from verifiers.code.task import CodeTask, IOCase

INPUT_FILE, OUTPUT_FILE, ANSWER_FILE = "input.txt", "output.txt", "answer.txt"
# testlib's exit codes for an interactor (and a checker).
OK, WRONG_ANSWER, PRESENTATION_ERROR, FAIL, DIRT, POINTS, UNEXPECTED_EOF = 0, 1, 2, 3, 4, 7, 8
INTERACTOR_VERDICTS = {
    WRONG_ANSWER: "wrong answer",
    PRESENTATION_ERROR: "presentation error",
    DIRT: "presentation error",
    POINTS: "partial",
    UNEXPECTED_EOF: "unexpected end of output",
}
# A candidate waits on the interactor as well as computing: its wall clock (the idleness
# limit) is this many times its CPU budget, plus a floor for the sandboxes' start.
IDLENESS_FACTOR = 2.0
IDLENESS_FLOOR_S = 1.0
# The interactor outlives the candidate by this much, so that it sees the candidate's
# end (its stdin closes) and reports on it before its own limits could stop it.
INTERACTOR_MARGIN_S = 5.0
INTERACTOR_MEMORY_MB = 1024
INTERACTOR_OUTPUT_BYTES = 64_000_000
INTERACTOR_PROCESSES = 8
# testlib writes "points X" (quitp) to stderr with exit code 7.
_POINTS = re.compile(rb"points\s+([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")


class InteractorFailed(SandboxError):
    """The task's interactor failed (exit 3, a crash, its limits): verdict `error`, never
    the candidate's doing. The message is ours; the interactor's own text stays out."""

    cause = "interactor_failed"


@dataclass
class Program:
    """A runnable program: its command and the files it needs in the scratch directory."""

    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)


def python_program(source: str, name: str = "main.py") -> Program:
    return Program(["python3", "-I", "-S", name], {name: source.encode()})


def interactor_program(task: CodeTask) -> Program:
    """The task's interactor, ready to run (compiled languages: see `prepare_program`)."""
    assert task.interactor is not None
    return prepare_program(task.interactor.language, task.interactor.source, "interactor")


def prepare_program(language: str, source: str, stem: str) -> Program:
    if language == "python":
        return python_program(source, f"{stem}.py")
    raise TaskInvalid(f"task.interactor.language: {language!r} interactors are not supported yet")


def candidate_interactive_limits(task: CodeTask, cpu_s: float | None = None) -> Limits:
    """The candidate's limits for one interactive case (`cpu_s`: its language-scaled budget)."""
    base = candidate_limits(task)
    cpu = cpu_s if cpu_s is not None else base.cpu_s
    return base.replace(cpu_s=cpu, wall_s=cpu * IDLENESS_FACTOR + IDLENESS_FLOOR_S)


def interactor_limits(candidate: Limits) -> Limits:
    budget = candidate.wall_s + INTERACTOR_MARGIN_S
    return Limits(wall_s=budget, cpu_s=budget, memory_mb=INTERACTOR_MEMORY_MB, processes=INTERACTOR_PROCESSES,
                  output_bytes=INTERACTOR_OUTPUT_BYTES, file_size_mb=64, open_files=64, scratch_mb=256)


def _interactor_verdict(result: JobResult) -> int:
    """The interactor's exit code when it is one of testlib's verdicts; InteractorFailed otherwise."""
    if result.killed_by is not None:
        raise InteractorFailed(f"the interactor was stopped by its {result.killed_by} limit")
    if result.exit_code is None or result.signal is not None:
        raise InteractorFailed("the interactor ended by a signal")
    if result.exit_code == FAIL:
        raise InteractorFailed("the interactor reported its own failure (exit code 3)")
    if result.exit_code != OK and result.exit_code not in INTERACTOR_VERDICTS:
        raise InteractorFailed(f"the interactor exited with {result.exit_code}, not a testlib verdict")
    if result.violations:
        raise InteractorFailed("the interactor broke its sandbox's rules")
    return result.exit_code


def _points(stderr: bytes) -> float:
    found = _POINTS.search(stderr[-4096:])
    return min(max(float(found.group(1)), 0.0), 1.0) if found else 0.0


def run_interactive_case(sandbox: Sandbox, task: CodeTask, candidate: Program, interactor: Program, name: str,
                         case: IOCase, hidden: bool, cpu_s: float | None = None) -> TestRun:
    """One case of an interactive task. InteractorFailed (verdict `error`) when the
    interactor failed; a SandboxError when the sandbox did."""
    run = TestRun(name=name, hidden=hidden, status="error", stderr_safe=not hidden)
    limits = candidate_interactive_limits(task, cpu_s)
    files = {**interactor.files, INPUT_FILE: case.stdin.encode(), ANSWER_FILE: case.stdout.encode()}
    judge = Job([*interactor.argv, INPUT_FILE, OUTPUT_FILE, ANSWER_FILE], files, limits=interactor_limits(limits))
    judged, ran = sandbox.interact(judge, Job(candidate.argv, dict(candidate.files), limits=limits))
    verdict = _interactor_verdict(judged)
    _absorb(run, ran)
    if run.status == "timeout" or run.killed_by:
        if ran.killed_by == "timeout":
            run.detail = {"type": "IdlenessLimit" if ran.cpu_s < limits.cpu_s / 2 else "TimeLimit"}
        return run
    if run.violations:
        return run
    if verdict != OK:
        run.status = "fail"
        run.detail = {"type": "InteractorVerdict", "verdict": INTERACTOR_VERDICTS[verdict]}
        if verdict == POINTS:
            run.detail["points"] = _points(judged.stderr)
        return run
    if ran.exit_code != 0:
        run.detail = {"type": "ProcessEnded", "message": f"exit code {ran.exit_code}, signal {ran.signal}"}
        return run
    run.status = "pass"
    return run
