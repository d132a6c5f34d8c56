"""Compiled and scripted languages: compile once, run every case, judge on the host.

The response's source is compiled in a job of its own (pool `code-compile`, its own
limits, no network, nothing of the task inside); the artifacts come back here, are kept
in a bounded cache keyed by the source (identical sources in a group, or across groups,
compile once), and are sent to a fresh job per case (pool `code-native`) under the task's
limits times the language's time factor. The expected output never enters that job: the
host compares, or the task's checker does in a job of its own (pool `code-checker`),
holding the case's input, the candidate's output and the answer, with the candidate gone.

Sandboxed code: verifiers/code/inside/native.py. Languages: verifiers/code/languages.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import signal
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandboxes.base import CallResult, Limits, Sandbox, SandboxError
from verifiers.base import TaskInvalid, clip
from verifiers.code import wire
from verifiers.code.compare import first_difference, outputs_match
from verifiers.code.languages import COMPILED, LANGUAGES, VIRTUAL_ALLOWANCE_MB, Language, fill, fill_env, main_name
from verifiers.code.runner import TestRun, absorb
from verifiers.code.task import Checker, CodeTask, IOCase

COMPILE_POOL = "code-compile"
RUN_POOL = "code-native"
CHECKER_POOL = "code-checker"
# A compile's own limits (not the task's): a judge's usual compile budget.
COMPILE_WALL_S = 60.0
COMPILE_CPU_S = 30.0
COMPILE_MEMORY_MB = 2048
COMPILE_PROCESSES = 64
# The artifacts come back on the compile job's stdout.
COMPILE_OUTPUT_BYTES = 11 * 1024 * 1024
COMPILE_FILE_MB = 64
COMPILE_SCRATCH_MB = 256
# What of a compiler's message a policy may be shown (it is about its own code only).
MESSAGE_CHARS = 4000
# Room for the sandboxed runner around the program it runs.
RUNNER_MEMORY_MB = 256
RUNNER_MARGIN_S = 2.0
MAX_STACK_MB = 1024
# A checker's limits (the task's trusted code, run once per case).
CHECKER_TIME_S = 10.0
CHECKER_MEMORY_MB = 1024
CHECKER_OUTPUT_BYTES = 64 * 1024
CHECKER_MESSAGE_CHARS = 300
# A batch of cases in one job (inside/cases.py): at most this many cases, this much input
# (in the job's payload) and this much output (each case's stdout and stderr, up to the
# task's output limit each, on the job's captured stdout).
BATCH_CASES = 32
BATCH_INPUT_BYTES = 8 * 1024 * 1024
BATCH_OUTPUT_BYTES = 48 * 1024 * 1024
BATCH_OUTPUT_SLACK = 64 * 1024
# Per case, on top of its own wall clock: ending and reaping its tree, wiping what it wrote.
CASE_END_S = 2.5
RUNNER_CPU_PER_CASE_S = 0.2
# Compiled programs kept for identical sources, in bytes of artifacts.
CACHE_BYTES = 256 * 1024 * 1024
# Sources compiled once whose program stayed in its sandbox (see _CompileCache).
SEEN_KEYS = 65536
_POINTS = re.compile(rb"^\s*points\s+([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.MULTILINE)
# The kinds the runs report, for flags.
NATIVE_FLAGS = frozenset({"runtime:process_limit"})


@dataclass
class Compiled:
    """A compile's outcome: artifacts to run, or the reason it failed (policy-safe)."""

    language: str
    main: str
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> base64
    error: str | None = None
    message: str = ""
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def size(self) -> int:
        return sum(len(v) for v in self.artifacts.values()) + len(self.message)


class _CompileCache:
    """Compiled programs by (language, source): one compile per distinct source, even
    when a group's identical responses arrive at once (the others wait for the first).

    A response compiled and run in one job (`compile_and_run`) keeps its program in the
    sandbox unless the host asks for it back: it is asked for when another response of the
    same source waits here, or when that source was seen before (`wanted`); a source seen
    once is remembered as such (`seen`, bounded), so that its next response brings the
    program back and the ones after it find it here."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, Compiled] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()
        self.building: dict[str, threading.Lock] = {}
        self.waiting: dict[str, int] = {}
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.compiles = 0  # compiles actually run (for tests and benchmarks)

    def claim(self, key: str) -> tuple[Compiled | None, threading.Lock | None]:
        """(the cached program, None), or (None, the key's gate, held: build, then `finish`)."""
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                return found, None
            gate = self.building.setdefault(key, threading.Lock())
            self.waiting[key] = self.waiting.get(key, 0) + 1
        gate.acquire()
        with self.lock:
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.waiting[key]
            found = self.entries.get(key)
        if found is not None:
            self._release(key, gate)
            return found, None
        return None, gate

    def wanted(self, key: str) -> bool:
        """Whether a program compiled for `key` should come back to be kept here."""
        with self.lock:
            return key in self.waiting or key in self.seen

    def finish(self, key: str, gate: threading.Lock, compiled: Compiled | None, compiled_here: bool) -> None:
        """Keep `compiled` when it can serve the next response (artifacts, or a compile
        error); otherwise remember that the source was seen. Then let the waiting in."""
        with self.lock:
            self.compiles += compiled_here
            if compiled is not None and (compiled.artifacts or compiled.error):
                self.seen.pop(key, None)
                self.entries[key] = compiled
                self.bytes += compiled.size()
                while self.bytes > self.max_bytes and len(self.entries) > 1:
                    _, old = self.entries.popitem(last=False)
                    self.bytes -= old.size()
            elif compiled_here:
                self.seen[key] = None
                while len(self.seen) > SEEN_KEYS:
                    self.seen.popitem(last=False)
        self._release(key, gate)

    def _release(self, key: str, gate: threading.Lock) -> None:
        with self.lock:
            if key not in self.waiting and self.building.get(key) is gate:
                del self.building[key]
        gate.release()

    def get(self, key: str, build: Any) -> tuple[Compiled, bool]:
        """(the compiled program, whether this call compiled it)."""
        found, gate = self.claim(key)
        if found is not None:
            return found, False
        assert gate is not None
        compiled = None
        try:
            compiled = build()
        finally:
            self.finish(key, gate, compiled, compiled is not None)
        return compiled, True


CACHE = _CompileCache(CACHE_BYTES)


def _language(name: str) -> Language:
    return LANGUAGES[name]


def compile_limits(language: Language) -> Limits:
    memory = COMPILE_MEMORY_MB if language.address_space_limit else COMPILE_MEMORY_MB + VIRTUAL_ALLOWANCE_MB
    return Limits(wall_s=COMPILE_WALL_S + RUNNER_MARGIN_S, cpu_s=COMPILE_CPU_S, memory_mb=memory,
                  processes=COMPILE_PROCESSES, output_bytes=COMPILE_OUTPUT_BYTES, file_size_mb=COMPILE_FILE_MB,
                  open_files=256, scratch_mb=COMPILE_SCRATCH_MB)


def compile_program(sandbox: Sandbox, language_name: str, source: str,
                    testlib: bool = False) -> tuple[Compiled, bool]:
    """Compile `source` once (cached): (the program, whether this call compiled it);
    raise SandboxError when the toolchain itself failed.
    `testlib`: a C/C++ checker, compiled with the vendored testlib.h on its include path
    (verifiers/code/inside/testlib/), so that a testlib checker compiles unchanged."""
    language = _language(language_name)
    main, argv, key = _compile_key(sandbox, language, source, testlib)
    testlib = testlib and language.name in ("c", "cpp")
    return CACHE.get(key, lambda: _compile(sandbox, language, main, argv, source, testlib))


def _compile_key(sandbox: Sandbox, language: Language, source: str,
                 testlib: bool = False) -> tuple[str, list[str] | None, str]:
    """(the main name, the compile command, the cache key) of a source. The key names the
    sandbox's toolchain too (backend, image): a program built by the host's compiler for the
    process backend is never run in a container image, nor the other way round, when one
    process verifies on both."""
    main = main_name(language, source)
    argv = fill(language.compile, main=main) if language.compile else None
    testlib = testlib and language.name in ("c", "cpp")
    described = sandbox.describe()
    toolchain = [described.get(name) for name in ("backend", "image", "image_source")]
    return main, argv, hashlib.sha256(json.dumps([toolchain, language.name, main, argv, testlib, source]).encode()
                                      ).hexdigest()


def _compile_payload(language: Language, main: str, argv: list[str], source: str, testlib: bool) -> dict[str, Any]:
    return {"files": {**language.support_files, language.source.format(main=main): source}, "argv": argv,
            "env": fill_env(language.compile_env), "artifacts": list(fill(language.artifacts, main=main)),
            "wall_s": COMPILE_WALL_S, "testlib": testlib, "needs_own_exe": language.needs_own_exe}


def _compile(sandbox: Sandbox, language: Language, main: str, argv: list[str] | None, source: str,
             testlib: bool) -> Compiled:
    filename = language.source.format(main=main)
    if argv is None:
        return Compiled(language.name, main, {filename: base64.b64encode(source.encode()).decode()})
    payload = _compile_payload(language, main, argv, source, testlib)
    result = sandbox.call(wire.NATIVE_COMPILE, payload, compile_limits(language), pool=COMPILE_POOL,
                          preload=wire.NATIVE_PRELOAD)
    value = result.value if result.returned and isinstance(result.value, dict) else None
    compiled = _compiled_from(language, main, value, result.killed_by, result.cpu_s, result.wall_s)
    if not compiled.error:
        compiled.artifacts = _split_artifacts(value["artifacts"], result.stdout)  # type: ignore[index]
    return compiled


def _compiled_from(language: Language, main: str, value: dict[str, Any] | None, killed_by: str | None,
                   cpu_s: float, wall_s: float) -> Compiled:
    """A compile's outcome from the compiler's report (None: there was none), without its
    artifacts; raise SandboxError when the toolchain itself failed."""
    compiled = Compiled(language.name, main, cpu_s=cpu_s, wall_s=wall_s)
    if value is None:
        # The compile job ended without a report: its limits, or the compiler's doing.
        compiled.error = _compile_limit_reason(killed_by) or "the compiler ended abnormally"
        return compiled
    compiled.message = _clean_message(str(value.get("message", "")))
    if value.get("killed_by"):
        compiled.error = _compile_limit_reason("timeout")
    elif value.get("exit_code") == 127 and not compiled.message:
        # execve failed: the toolchain is missing here, which is never the response's fault.
        raise SandboxError(f"the {language.name} toolchain is not installed in the sandbox", cause="toolchain_missing")
    elif "no /proc/self/exe available" in compiled.message:
        # rustc 1.63 finds its sysroot through /proc/self/exe. A process-backend job has an
        # empty /proc; the compile job gives rustc that one link in a user namespace of its
        # own (inside/native.py), and lands here only where none can be made.
        raise SandboxError(f"the {language.name} toolchain cannot run in this sandbox backend (no /proc)",
                           cause="toolchain_unavailable")
    elif value.get("too_large"):
        compiled.error = "the compiled program is larger than 10 MiB"
    elif value.get("exit_code") != 0:
        if value.get("signal") == signal.SIGXFSZ:
            compiled.error = "compilation wrote more than its file size limit"
        elif value.get("signal") in (signal.SIGXCPU, signal.SIGKILL):
            compiled.error = _compile_limit_reason("cpu")
        else:
            compiled.error = "compilation failed"
    elif not value.get("artifacts"):
        compiled.error = "compilation produced no program"
    return compiled


def _split_artifacts(listing: Any, stdout: bytes) -> dict[str, str]:
    """The compiled files, concatenated on the compile job's stdout in the listed order."""
    out: dict[str, str] = {}
    offset = 0
    for name, size in listing:
        out[str(name)] = base64.b64encode(stdout[offset:offset + int(size)]).decode()
        offset += int(size)
    if offset != len(stdout):
        raise SandboxError("a compile job's artifacts did not arrive whole", cause="compile_transfer_failed")
    return out


def _compile_limit_reason(killed_by: str | None) -> str | None:
    return {"timeout": f"compilation exceeded its time limit ({COMPILE_WALL_S:g} s)",
            "cpu": f"compilation exceeded its CPU limit ({COMPILE_CPU_S:g} s)",
            "memory": f"compilation exceeded its memory limit ({COMPILE_MEMORY_MB} MB)",
            "output": "compilation wrote too much output"}.get(killed_by or "")


def _clean_message(message: str) -> str:
    # The compiler only ever saw the response's own file: its message is about that code.
    return clip(message, MESSAGE_CHARS) if message else ""


def time_limits(task: CodeTask, language: Language) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one case: the task's limit times the time factor;
    the wall clock allows twice that plus a second (a loaded machine is not the program's fault)."""
    factor = task.time_factor if task.time_factor is not None else language.time_factor
    cpu = task.time_limit_s * factor
    return cpu, 2 * cpu + 1.0


def batch_limits(task: CodeTask, language: Language, cpu: float, wall: float, cases: int) -> Limits:
    """The job of `cases` cases: each case's own limits are the runner's to enforce
    (inside/cases.py); around it, room for all of them, in turn."""
    virtual = 0 if language.address_space_limit else VIRTUAL_ALLOWANCE_MB
    return Limits(wall_s=cases * (wall + CASE_END_S) + RUNNER_MARGIN_S,
                  cpu_s=cpu + RUNNER_MARGIN_S + cases * RUNNER_CPU_PER_CASE_S,
                  memory_mb=task.memory_mb + virtual + RUNNER_MEMORY_MB, processes=language.processes,
                  output_bytes=cases * 2 * task.output_limit_bytes + BATCH_OUTPUT_SLACK, file_size_mb=16, open_files=64,
                  scratch_mb=64)


def _run_payload(language: Language, compiled: Compiled, memory_mb: int, stdin: str, cpu: float | None,
                 wall: float, extra_files: dict[str, str] | None = None,
                 extra_args: tuple[str, ...] = ()) -> dict[str, Any]:
    values = {"memory_mb": memory_mb, "main": compiled.main}
    return {
        "files": {**compiled.artifacts, **(extra_files or {})},
        "executables": list(language.executables),
        "argv": [*fill(language.run, **values), *extra_args],
        "env": fill_env(language.run_env, **values),
        "stdin": stdin,
        "wall_s": wall,
        "cpu_s": cpu,
        "address_space_mb": memory_mb if language.address_space_limit else None,
        "stack_mb": min(memory_mb, MAX_STACK_MB),
    }


Plan = list[tuple[str, bool, IOCase]]


def _batches(task: CodeTask, plan: Plan) -> list[Plan]:
    """The cases in order, cut into batches whose inputs fit a job's payload and whose
    outputs fit its captured stdout (at least one case each)."""
    per_batch = max(1, min(BATCH_CASES, BATCH_OUTPUT_BYTES // (2 * task.output_limit_bytes)))
    batches: list[Plan] = []
    size = 0
    for item in plan:
        stdin = len(item[2].stdin.encode())
        if not batches or len(batches[-1]) >= per_batch or size + stdin > BATCH_INPUT_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += stdin
    return batches


def compile_and_run(sandbox: Sandbox, task: CodeTask, source: str, plan: Plan,
                    checker_for: Callable[[], Compiled | None]) -> tuple[Compiled, bool, list[TestRun]]:
    """A response's program and its runs: (the program, whether this call compiled it,
    the cases' runs; none when it did not compile). A source not compiled before compiles
    and runs its first batch of cases in ONE job (inside/build.py: the program stays in the
    sandbox, unless the cache wants it back); one compiled before runs from the cache.
    `checker_for()`: the task's checker, asked for once the program compiled."""
    language = _language(task.language)
    main, argv, key = _compile_key(sandbox, language, source)
    found, gate = CACHE.claim(key)
    if found is not None:
        return found, False, [] if found.error else run_cases(sandbox, task, found, checker_for(), plan)
    assert gate is not None and argv is not None
    cpu, wall = time_limits(task, language)
    batches = _batches(task, plan)
    first = batches[0] if batches else []
    compiled: Compiled | None = None
    try:
        compiled, result, value = _build_and_run(sandbox, task, language, main, argv, source, key, first,
                                                         len(batches) > 1, cpu, wall)
    finally:
        CACHE.finish(key, gate, compiled, compiled is not None)
    if compiled.error:
        return compiled, True, []
    checker = checker_for()
    runs, ended = _until_end(task, _judge_batch(sandbox, task, language, checker, first, cpu, result, value)
                             if first else [])
    if ended:
        return compiled, True, runs
    rest = plan[len(runs):]
    if rest:
        # Cases left (more batches, or the job ended early with partial credit): from the
        # cache, compiled again there only where the program stayed in its sandbox.
        program = compiled if compiled.artifacts else compile_program(sandbox, language.name, source)[0]
        if program.error:  # cannot happen for a source that compiled; never a reward if it does
            raise SandboxError("a program that compiled did not compile again", cause="compile_transfer_failed")
        runs += run_cases(sandbox, task, program, checker, rest)
    return compiled, True, runs


def _build_and_run(sandbox: Sandbox, task: CodeTask, language: Language, main: str, argv: list[str], source: str,
                   key: str, batch: Plan, keep: bool, cpu: float, wall: float
                   ) -> tuple[Compiled, CallResult, dict[str, Any]]:
    """The one job (inside/build.py): (the program, the job's result with the cases'
    outputs on its stdout, the runner's report)."""
    comp = compile_limits(language)
    run = batch_limits(task, language, cpu, wall, len(batch))
    run_payload = _cases_payload(task, language, Compiled(language.name, main), batch, cpu, wall)
    del run_payload["files"]
    # What a run job's own limits were, for each case (the job's are the compile's too).
    run_payload["limits"].update(file_size_mb=run.file_size_mb, open_files=run.open_files,
                                 processes=run.processes, process_memory_mb=run.memory_mb)
    compile_payload = {**_compile_payload(language, main, argv, source, False),
                       "limits": {"cpu_s": comp.cpu_s, "memory_mb": comp.memory_mb, "file_size_mb": comp.file_size_mb,
                                  "open_files": comp.open_files, "processes": comp.processes}}
    limits = Limits(wall_s=comp.wall_s + run.wall_s, cpu_s=comp.cpu_s + run.cpu_s,
                    memory_mb=max(comp.memory_mb, run.memory_mb), processes=max(comp.processes, run.processes),
                    output_bytes=comp.output_bytes + run.output_bytes,
                    file_size_mb=max(comp.file_size_mb, run.file_size_mb),
                    open_files=max(comp.open_files, run.open_files), scratch_mb=max(comp.scratch_mb, run.scratch_mb))
    reported: dict[str, Any] = {}

    def on_message(body: Any) -> Any:
        # The runner's report of a compile that succeeded: may the program stay there?
        if isinstance(body, dict) and isinstance(body.get("compiled"), dict) and not reported:
            reported.update(body["compiled"])
            return {"keep": keep or CACHE.wanted(key)}
        return None

    result = sandbox.call(wire.NATIVE_BUILD, {"compile": compile_payload, "run": run_payload,
                                              "run_scratch_mb": run.scratch_mb},
                          limits, pool=RUN_POOL, preload=wire.NATIVE_PRELOAD, on_message=on_message)
    value = result.value if result.returned and isinstance(result.value, dict) else {}
    if result.raised is not None:
        raise SandboxError("the compile-and-run job's runner failed", cause="runner_failed")
    report = value.get("compile") if isinstance(value.get("compile"), dict) else (reported or None)
    if report is None:
        compiled = _compiled_from(language, main, None, result.killed_by, result.cpu_s, result.wall_s)
    else:
        compiled = _compiled_from(language, main, report, None, float(report.get("cpu_s") or 0.0),
                                  float(report.get("wall_s") or 0.0))
    if not compiled.error and isinstance(value.get("kept"), list) and value["kept"]:
        # The program, after the cases' outputs.
        size = sum(int(size) for _, size in value["kept"])
        compiled.artifacts = _split_artifacts(value["kept"], result.stdout[len(result.stdout) - size:])
        result.stdout = result.stdout[:len(result.stdout) - size]
    if not compiled.error:
        # What the runs used, without the compile's share of the job.
        result.cpu_s = max(result.cpu_s - compiled.cpu_s, 0.0)
        result.wall_s = max(result.wall_s - compiled.wall_s, 0.0)
    return compiled, result, value


def _until_end(task: CodeTask, runs: list[TestRun]) -> tuple[list[TestRun], bool]:
    """The runs up to the one that ends the response's run, and whether one did: without
    partial credit the first failing case ends it; a violation always does."""
    for index, run in enumerate(runs):
        if run.violations or (run.status != "pass" and not task.partial_credit):
            return runs[:index + 1], True
    return runs, False


def run_cases(sandbox: Sandbox, task: CodeTask, compiled: Compiled, checker: Compiled | None,
              plan: Plan) -> list[TestRun]:
    """Every stdin/stdout case of a compiled program, in order: the program crosses once
    per batch of cases, and the runner in that job runs it once per case as a fresh process
    tree under the case's limits (inside/cases.py). Without partial credit the first
    failing case ends the run, as before: the runner stops at a case that did not end
    cleanly; one that ended cleanly with a wrong answer is only known here, so the cases
    after it in its batch have run, and are not judged."""
    language = _language(compiled.language)
    cpu, wall = time_limits(task, language)
    runs: list[TestRun] = []
    pending = _batches(task, plan)
    while pending:
        batch = pending.pop(0)
        ran = _run_batch(sandbox, task, language, compiled, checker, batch, cpu, wall)
        kept, ended = _until_end(task, ran)
        runs += kept
        if ended:
            return runs
        if ran and len(ran) < len(batch):  # the job ended early (partial credit goes on): the rest afresh
            pending.insert(0, batch[len(ran):])
    return runs


def _cases_payload(task: CodeTask, language: Language, compiled: Compiled, batch: Plan, cpu: float,
                   wall: float) -> dict[str, Any]:
    payload = _run_payload(language, compiled, task.memory_mb, "", cpu, wall)
    del payload["stdin"]
    payload["limits"] = {key: payload.pop(key) for key in ("wall_s", "cpu_s", "address_space_mb", "stack_mb")}
    payload["limits"]["output_bytes"] = task.output_limit_bytes
    payload["cases"] = [case.stdin for _, _, case in batch]
    payload["stop_on_failure"] = not task.partial_credit
    return payload


def _run_batch(sandbox: Sandbox, task: CodeTask, language: Language, compiled: Compiled,
               checker: Compiled | None, batch: Plan, cpu: float, wall: float) -> list[TestRun]:
    payload = _cases_payload(task, language, compiled, batch, cpu, wall)
    result = sandbox.call(wire.NATIVE_CASES, payload, batch_limits(task, language, cpu, wall, len(batch)),
                          pool=RUN_POOL, preload=wire.NATIVE_PRELOAD)
    value = result.value if result.returned and isinstance(result.value, dict) else {}
    return _judge_batch(sandbox, task, language, checker, batch, cpu, result, value)


def _judge_batch(sandbox: Sandbox, task: CodeTask, language: Language, checker: Compiled | None, batch: Plan,
                 cpu: float, result: CallResult, value: dict[str, Any]) -> list[TestRun]:
    """The cases of a batch from the runner's reports; their outputs follow each other on
    the job's stdout."""
    reports = value.get("cases") if isinstance(value.get("cases"), list) else []
    runs: list[TestRun] = []
    offset = 0
    for (name, hidden, case), report in zip(batch, reports, strict=False):
        if not isinstance(report, dict):
            break
        out_len, err_len = int(report.get("stdout_bytes") or 0), int(report.get("stderr_bytes") or 0)
        stdout = result.stdout[offset:offset + out_len]
        stderr = result.stdout[offset + out_len:offset + out_len + err_len]
        offset += out_len + err_len
        killed_by = report.get("killed_by") if report.get("killed_by") in ("timeout", "output") else None
        case_result = CallResult(exit_code=report.get("exit_code"), signal=report.get("signal"), stdout=stdout,
                                 stderr=stderr, backend=result.backend, value=report, returned=True,
                                 killed_by=killed_by)
        runs.append(_judge_case(sandbox, task, language, checker, name, hidden, case, case_result, report, cpu))
    if len(runs) < len(batch) and not value.get("unclean"):
        # The job ended without a report for this case: its limits, or the program's doing
        # (it killed its runner). The case fails; the sandbox's own account says how.
        name, hidden, case = batch[len(runs)]
        runs.append(_judge_case(sandbox, task, language, checker, name, hidden, case, result, None, cpu))
    if runs and result.violations:
        runs[-1].violations += [v for v in result.violations if v != "aborted by host"]
    return runs


def _judge_case(sandbox: Sandbox, task: CodeTask, language: Language, checker: Compiled | None, name: str,
                hidden: bool, case: IOCase, result: CallResult, report: dict[str, Any] | None,
                cpu: float) -> TestRun:
    """One case's run, from the runner's report (None: the job ended without one)."""
    run = TestRun(name=name, hidden=hidden, status="error", stderr_safe=not hidden)
    if report is not None:
        _merge_report(result, report, cpu, task.memory_mb, language)
    absorb(run, result)
    if run.status == "timeout" or run.killed_by:
        return run
    if report is None:
        run.detail = {"type": "ProcessEnded", "message": "the program's runner ended abnormally"}
        return run
    if report.get("exit_code") != 0:
        if report.get("signal") is not None:
            run.detail = {"type": "RuntimeError", "message": f"killed by signal {report['signal']}"}
        else:
            run.detail = {"type": "RuntimeError", "message": f"exit code {report.get('exit_code')}"}
        return run
    judge_output(sandbox, task, checker, case, run, result.stdout)
    return run


def _merge_report(result: CallResult, report: dict[str, Any], cpu: float, memory_mb: int,
                  language: Language) -> None:
    """The runner's account of the program's tree is what the limits are judged on."""
    tree_cpu = float(report.get("cpu_s") or 0.0)
    peak = float(report.get("peak_memory_mb") or 0.0)
    result.cpu_s, result.wall_s = tree_cpu, float(report.get("wall_s") or result.wall_s)
    result.peak_memory_mb = peak
    sig = report.get("signal")
    if result.killed_by is not None:
        return
    if report.get("killed_by") == "timeout":
        result.killed_by = "timeout"
    elif sig == signal.SIGXCPU or tree_cpu > cpu or (sig == signal.SIGKILL and tree_cpu >= 0.95 * cpu):
        result.killed_by = "cpu"
    elif peak > memory_mb or (report.get("exit_code") != 0 and any(
            word in result.stderr[-4096:] for word in language.out_of_memory)):
        result.killed_by = "memory"


def judge_output(sandbox: Sandbox, task: CodeTask, checker: Compiled | None, case: IOCase, run: TestRun,
                 stdout: bytes) -> None:
    """Decide a case whose program ended cleanly: the task's checker, or the comparison."""
    got = stdout.decode("utf-8", errors="replace")
    if checker is not None:
        _check(sandbox, checker, run, case, stdout)
        return
    if outputs_match(got, case.stdout, task.compare, task.float_tolerance):
        run.status = "pass"
        return
    run.status = "fail"
    run.detail = {"type": "WrongAnswer", "first_different_line": first_difference(got, case.stdout)}
    if not run.hidden:  # a visible case may be shown, expected output included
        run.detail.update(expected=case.stdout[:300], got=got[:300])


def compile_checker(sandbox: Sandbox, checker: Checker) -> Compiled:
    """The task's checker, compiled once (cached); a checker that does not compile is the
    task's fault (422), never a response's."""
    compiled, _ = compile_program(sandbox, checker.language, checker.source, testlib=True)
    if compiled.error:
        raise TaskInvalid(f"checker: it does not compile ({compiled.error}): {compiled.message[:500]}")
    return compiled


def _check(sandbox: Sandbox, checker: Compiled, run: TestRun, case: IOCase, stdout: bytes) -> None:
    language = _language(checker.language)
    files = {"input.txt": base64.b64encode(case.stdin.encode()).decode(),
             "output.txt": base64.b64encode(stdout).decode(),
             "answer.txt": base64.b64encode(case.stdout.encode()).decode()}
    payload = _run_payload(language, checker, CHECKER_MEMORY_MB, "", CHECKER_TIME_S, CHECKER_TIME_S * 2,
                           files, ("input.txt", "output.txt", "answer.txt"))
    virtual = 0 if language.address_space_limit else VIRTUAL_ALLOWANCE_MB
    limits = Limits(wall_s=CHECKER_TIME_S * 2 + RUNNER_MARGIN_S, cpu_s=CHECKER_TIME_S + RUNNER_MARGIN_S,
                    memory_mb=CHECKER_MEMORY_MB + virtual + RUNNER_MEMORY_MB, processes=language.processes,
                    output_bytes=CHECKER_OUTPUT_BYTES, file_size_mb=16, open_files=64,
                    scratch_mb=64 + 3 * (len(stdout) + len(case.stdout) + len(case.stdin)) // (1 << 20))
    result = sandbox.call(wire.NATIVE_RUN, payload, limits, pool=CHECKER_POOL, preload=wire.NATIVE_PRELOAD)
    report = result.value if result.returned and isinstance(result.value, dict) else None
    code = report.get("exit_code") if report is not None and not report.get("killed_by") else None
    if result.killed_by or code not in (wire.CHECKER_OK, wire.CHECKER_WRONG, wire.CHECKER_PRESENTATION,
                                        wire.CHECKER_POINTS):
        # testlib's `fail` (3), a crash or a checker over its limits: the task's checker
        # failed, never the response (verdict `error`, dropped from the group).
        raise SandboxError("the task's checker failed on a case (testlib exit 3, a crash or its limits)",
                           cause="checker_failed")
    message = (result.stderr or result.stdout).decode("utf-8", errors="replace").strip()
    shown = {"checker_message": message[:CHECKER_MESSAGE_CHARS]} if not run.hidden else {}
    if code == wire.CHECKER_OK:
        run.status = "pass"
        run.detail = shown
    elif code == wire.CHECKER_POINTS:
        found = _POINTS.search(result.stderr) or _POINTS.search(result.stdout)
        if found is None:
            raise SandboxError("the task's checker gave points without a number", cause="checker_failed")
        run.status = "fail"
        run.score = min(max(float(found.group(1)), 0.0), 1.0)
        run.detail = {"type": "Partial", "points": run.score, **shown}
    else:
        run.status = "fail"
        kind = "WrongAnswer" if code == wire.CHECKER_WRONG else "PresentationError"
        run.detail = {"type": kind, **shown}




# ---------------------------------------------------------------- toolchain versions

_versions: dict[str, str] = {}
_versions_lock = threading.Lock()
_VERSION_SCRIPT_CHARS = 200


def probe_versions(sandbox: Sandbox) -> dict[str, str]:
    """Ask the sandbox (where the toolchains are) what each toolchain says of its version."""
    found: dict[str, str] = {}
    for name, language in LANGUAGES.items():
        payload = {"files": {}, "argv": list(language.version), "env": fill_env(language.compile_env),
                   "artifacts": [], "wall_s": 20.0, "needs_own_exe": language.needs_own_exe}
        try:
            result = sandbox.call(wire.NATIVE_COMPILE, payload, compile_limits(language), pool=COMPILE_POOL,
                                  preload=wire.NATIVE_PRELOAD)
        except SandboxError:
            continue
        value = result.value if result.returned and isinstance(result.value, dict) else {}
        text = str(value.get("message", "")).strip()
        if value.get("exit_code") == 0 and text:
            found[name] = text.splitlines()[0][:_VERSION_SCRIPT_CHARS]
        else:
            found[name] = "not installed"
    with _versions_lock:
        _versions.update(found)
    return found


def probe_versions_soon(sandbox: Sandbox) -> None:
    """At start-up, in the background: GET /v1/verifiers reports what was found."""
    threading.Thread(target=lambda: _quietly(probe_versions, sandbox), name="code-toolchains", daemon=True).start()


def _quietly(work: Any, *args: Any) -> None:
    try:
        work(*args)
    except Exception:  # a version report is information; a failure is logged only
        import logging

        logging.getLogger(__name__).warning("could not probe the code toolchains", exc_info=True)


def languages_info() -> dict[str, Any]:
    """Per language: the commands, the default time factor and the toolchain's version."""
    with _versions_lock:
        versions = dict(_versions)
    return {name: {"version": versions.get(name, "not probed yet"),
                   "compile": " ".join(language.compile) if language.compile else None,
                   "run": " ".join(language.run), "time_factor": language.time_factor,
                   "candidate": name in COMPILED or name == "python"}
            for name, language in LANGUAGES.items()}
