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

import base64
import re
from dataclasses import dataclass, field

from sandboxes.base import Job, JobResult, Limits, Sandbox, SandboxError
from verifiers.base import TaskInvalid
from verifiers.code.languages import LANGUAGES, VIRTUAL_ALLOWANCE_MB, Language, fill, fill_env
from verifiers.code.native import MAX_STACK_MB, Compiled, compile_program, time_limits
from verifiers.code.runner import TestRun, absorb, candidate_limits
from verifiers.code.task import CodeTask, IOCase

INPUT_FILE, OUTPUT_FILE, ANSWER_FILE = "input.txt", "output.txt", "answer.txt"
# Inside the sandbox (both backends mount the packages at /opt/assay).
LAUNCHER = ("/usr/bin/python3", "-I", "-S", "/opt/assay/verifiers/code/inside/launch.py")
# testlib's exit codes for an interactor (and a checker).
OK, WRONG_ANSWER, PRESENTATION_ERROR, FAIL, DIRT, POINTS, UNEXPECTED_EOF = 0, 1, 2, 3, 4, 7, 8
INTERACTOR_VERDICTS = {
    WRONG_ANSWER: "wrong answer",
    PRESENTATION_ERROR: "presentation error",
    DIRT: "presentation error",
    POINTS: "partial",
    UNEXPECTED_EOF: "unexpected end of output",
}
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
    """A runnable program: its command, environment and the files it needs in scratch."""

    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 0  # the address-space allowance over the task's memory it needs
    processes: int = 16


def launch(language: Language, compiled: Compiled, memory_mb: int) -> Program:
    """A compiled program as a stream job, started by verifiers/code/inside/launch.py."""
    values = {"memory_mb": memory_mb, "main": compiled.main}
    argv = fill(language.run, **values)
    executable = next((name for name in language.executables if argv[0] == f"./{name}"), "")
    stack_kb = min(memory_mb, MAX_STACK_MB) * 1024
    files = {name: base64.b64decode(data) for name, data in compiled.artifacts.items()}
    return Program([*LAUNCHER, executable, str(stack_kb), *argv], files, fill_env(language.run_env, **values),
                   0 if language.address_space_limit else VIRTUAL_ALLOWANCE_MB, language.processes)


def candidate_program(task: CodeTask, program: str, compiled: Compiled | None) -> Program:
    if compiled is None:  # Python: the response's module (after the task's prompt)
        python = LANGUAGES["python"]
        return Program(list(python.run), {"main.py": program.encode()})
    return launch(LANGUAGES[compiled.language], compiled, task.memory_mb)


def interactor_program(sandbox: Sandbox, task: CodeTask) -> Program:
    """The task's interactor, compiled once (cached; C and C++ with testlib.h at hand).
    One that does not compile is the task's fault (422), never a response's."""
    assert task.interactor is not None
    compiled, _ = compile_program(sandbox, task.interactor.language, task.interactor.source, testlib=True)
    if compiled.error:
        raise TaskInvalid(f"interactor: it does not compile ({compiled.error}): {compiled.message[:500]}")
    return launch(LANGUAGES[compiled.language], compiled, INTERACTOR_MEMORY_MB)


def candidate_interactive_limits(task: CodeTask, candidate: Program) -> Limits:
    """The candidate's limits for one interactive case: CPU as for any case of its
    language; the wall clock, which also runs while it waits on the interactor, is the
    idleness limit."""
    language = LANGUAGES[task.language]
    cpu, wall = time_limits(task, language)
    return candidate_limits(task).replace(cpu_s=cpu, wall_s=wall, memory_mb=task.memory_mb + candidate.memory_mb,
                                          processes=candidate.processes)


def interactor_limits(candidate: Limits, interactor: Program) -> Limits:
    budget = candidate.wall_s + INTERACTOR_MARGIN_S
    return Limits(wall_s=budget, cpu_s=budget, memory_mb=INTERACTOR_MEMORY_MB + interactor.memory_mb,
                  processes=interactor.processes, output_bytes=INTERACTOR_OUTPUT_BYTES, file_size_mb=64,
                  open_files=64, scratch_mb=256)


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


def run_interactive(sandbox: Sandbox, task: CodeTask, program: str, compiled: Compiled | None, name: str,
                    case: IOCase, hidden: bool) -> TestRun:
    """One case of an interactive task (`compiled`: the response's compiled program, None
    for Python's `program`). InteractorFailed (verdict `error`) when the interactor
    failed; a SandboxError when the sandbox did."""
    candidate = candidate_program(task, program, compiled)
    interactor = interactor_program(sandbox, task)
    run = TestRun(name=name, hidden=hidden, status="error", stderr_safe=not hidden)
    limits = candidate_interactive_limits(task, candidate)
    files = {**interactor.files, INPUT_FILE: case.stdin.encode(), ANSWER_FILE: case.stdout.encode()}
    judge = Job([*interactor.argv, INPUT_FILE, OUTPUT_FILE, ANSWER_FILE], files, env=interactor.env,
                limits=interactor_limits(limits, interactor))
    judged, ran = sandbox.interact(judge, Job(candidate.argv, candidate.files, env=candidate.env, limits=limits))
    verdict = _interactor_verdict(judged)
    absorb(run, ran)
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
            run.score = _points(judged.stderr + judged.stdout)
            run.detail["points"] = run.score
        return run
    if ran.exit_code != 0:
        run.detail = {"type": "ProcessEnded", "message": f"exit code {ran.exit_code}, signal {ran.signal}"}
        return run
    run.status = "pass"
    return run
