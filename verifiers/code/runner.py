"""Runs one test of a code task in the sandbox and classifies what happened.

Assert-style test: the candidate module is loaded in a session of the candidate pool;
the test code runs in a call of the grader pool; the host relays each proxied call from
the grader to the candidate. Stdin/stdout case: the program runs in one call of the
candidate pool and its captured stdout is compared here, on the trusted host.

The pass/fail decision only ever comes from (a) the grader's returned value, or (b) the
host's own comparison against the expected output. The candidate's exit code, stdout
text and self-reported status can only make a test fail, never pass.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandboxes.base import CallEnded, CallResult, CallSession, Limits, Sandbox, SandboxError
from verifiers.base import TaskInvalid
from verifiers.code import wire
from verifiers.code.compare import first_difference, outputs_match
from verifiers.code.task import CodeTask, IOCase

CANDIDATE_POOL = "code-candidate"
GRADER_POOL = "code-grader"
CANDIDATE_SERVE = wire.CANDIDATE_SERVE
CANDIDATE_PROGRAM = wire.CANDIDATE_PROGRAM
GRADER_TARGET = wire.GRADER_TARGET
# The grader waits on the candidate, so it gets the candidate's budget plus this margin:
# the candidate always runs out first and the grader reports that cleanly.
GRADER_MARGIN_S = 5.0
GRADER_MEMORY_MB = 1024
# Audit events that are policy violations (hard `compliance`), not just flags.
VIOLATION_EVENTS = {"network", "kill", "tamper_file"}
# The run's flags: a fixed vocabulary. What the candidate reports about itself can only
# pick names from it; nothing it writes ever becomes part of a name.
RUNTIME_FLAGS = frozenset({f"runtime:{kind}" for kind in wire.AUDIT_KINDS}
                          | {"runtime:process_limit", "runtime:exit_during_test", "runtime:unencodable_value"})
RUN_FLAGS = RUNTIME_FLAGS | {"grader_limit"}
# Bounds on what the candidate's self-reports may add to the evidence.
MAX_ERROR_TYPES = 16
TYPE_CHARS = 60
MESSAGE_CHARS = 300
# What of the candidate's module crosses to the grader: names, and plain values up to
# this many bytes once encoded (the grader's job frame must stay within its limits).
MAX_EXPORTS = wire.MAX_EXPORTS
EXPORT_NAME_CHARS = 100
EXPORTS_MAX_BYTES = 16 * 1024 * 1024
# Per-test limits that are not the task's to choose.
CANDIDATE_PROCESSES = 16
GRADER_PROCESSES = 8
GRADER_OUTPUT_BYTES = 200_000


@dataclass
class TestRun:
    """What one test did; `detail` is safe to show (no hidden test content)."""

    name: str
    hidden: bool
    status: str  # pass | fail | error | timeout
    detail: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_mb: float = 0.0
    killed_by: str | None = None
    violations: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    events: dict[str, int] = field(default_factory=dict)
    stderr: bytes = b""
    # Whether stderr may be shown: once hidden inputs reached the candidate, it could
    # echo them, so stderr (and candidate messages) of hidden tests are withheld.
    stderr_safe: bool = False
    # A checker's points for a case that was not accepted (testlib's `points`), in [0, 1].
    score: float | None = None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "hidden": self.hidden, "status": self.status,
                               "wall_s": round(self.wall_s, 4), "cpu_s": round(self.cpu_s, 4)}
        if self.killed_by:
            out["killed_by"] = self.killed_by
        return {**out, **self.detail}


def candidate_limits(task: CodeTask) -> Limits:
    return Limits(
        wall_s=task.time_limit_s,
        cpu_s=task.time_limit_s,
        memory_mb=task.memory_mb,
        processes=CANDIDATE_PROCESSES,
        output_bytes=task.output_limit_bytes,
        file_size_mb=16,
        open_files=64,
        scratch_mb=64,
    )


def grader_limits(task: CodeTask) -> Limits:
    budget = task.time_limit_s + GRADER_MARGIN_S
    return Limits(wall_s=budget, cpu_s=budget, memory_mb=GRADER_MEMORY_MB, processes=GRADER_PROCESSES,
                  output_bytes=GRADER_OUTPUT_BYTES, file_size_mb=1, open_files=64, scratch_mb=16)


def _ended_result(exc: SandboxError) -> CallResult | None:
    # CallEnded carries the finished call's result when the call ended while the host
    # still expected an answer (the candidate exited or was killed). Any other
    # SandboxError is an infrastructure failure and propagates (verdict `error`).
    if isinstance(exc, CallEnded) and isinstance(exc.result, CallResult):
        return exc.result
    return None


class _Relay:
    """The trusted host's side of the grader <-> candidate conversation."""

    def __init__(self, session: CallSession) -> None:
        self.session = session
        self.ended: CallResult | None = None
        self.events: dict[str, int] = {}
        self.errors: list[str] = []
        # An infrastructure failure seen while relaying: raised once the grader is done,
        # because an exception out of on_message would strand the grader's call.
        self.failure: SandboxError | None = None

    def ask(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if self.ended is not None or self.failure is not None:
            return None
        try:
            answer = self.session.request(message)
        except SandboxError as exc:
            ended = _ended_result(exc)
            if ended is None:
                raise
            self.ended = ended
            return None
        if not isinstance(answer, dict):
            return {"ok": False, "error": {"type": "ProtocolError", "message": "malformed answer"}}
        self.note_audit(answer.get("audit"))
        error = answer.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str) and len(self.errors) < MAX_ERROR_TYPES:
            self.errors.append(error["type"][:TYPE_CHARS])
        return answer

    def note_audit(self, audit: Any) -> None:
        """Merge an audit report the candidate sent (advisory: it only adds flags)."""
        for kind in known_events(audit.get("events") if isinstance(audit, dict) else None):
            self.events[kind] = 1

    def relay(self, body: Any) -> dict[str, Any]:
        """on_message handler for the grader: forward one call, wrap the reply so that
        the candidate can never forge a message that looks like it came from the host."""
        if not isinstance(body, dict) or body.get("op") != "call":
            return {"gone": "bad request from grader"}
        try:
            answer = self.ask(body)
        except SandboxError as exc:
            self.failure = exc
            return {"gone": "the candidate's sandbox failed"}
        if answer is None:
            return {"gone": "the candidate process ended"}
        return {"answer": _for_grader(answer)}

    def finish(self) -> CallResult:
        if self.failure is not None:
            raise self.failure
        if self.ended is not None:
            return self.ended
        try:
            return self.session.finish()
        except SandboxError as exc:
            ended = _ended_result(exc)
            if ended is None:
                raise
            return ended


def known_events(events: Any) -> list[str]:
    """The audit kinds of the vocabulary a candidate's report names (keys of a dict)."""
    if not isinstance(events, dict):
        return []
    return sorted(kind for kind in wire.AUDIT_KINDS if kind in events)


def _for_grader(answer: dict[str, Any]) -> dict[str, Any]:
    """What the grader reads of a candidate's answer, in shapes it expects: the value
    (plain data, decoded there) or the exception's type, builtin ancestors and message."""
    if answer.get("ok") is True:
        return {"ok": True, "value": answer.get("value")}
    error = answer.get("error") if isinstance(answer.get("error"), dict) else {}
    bases = error.get("bases") if isinstance(error.get("bases"), list) else []
    return {"ok": False, "error": {
        "type": error["type"][:TYPE_CHARS] if isinstance(error.get("type"), str) else "<unnamed>",
        "bases": [b[:TYPE_CHARS] for b in bases[:wire.MAX_EXCEPTION_BASES] if isinstance(b, str)],
        "message": error["message"][:MESSAGE_CHARS] if isinstance(error.get("message"), str) else "",
        "exit": error.get("exit") is True}}


def _exports_for_grader(exports: Any) -> dict[str, Any]:
    """The candidate's exports, bounded: identifiers only, known kinds only, plain values
    up to EXPORTS_MAX_BYTES in all (the rest is left unbound, the candidate's loss)."""
    out: dict[str, Any] = {}
    budget = EXPORTS_MAX_BYTES
    for name, info in exports.items() if isinstance(exports, dict) else ():
        if len(out) >= MAX_EXPORTS:
            break
        if not (isinstance(name, str) and len(name) <= EXPORT_NAME_CHARS and name.isidentifier()):
            continue
        kind = info.get("kind") if isinstance(info, dict) else None
        if kind == "callable":
            out[name] = {"kind": "callable"}
        elif kind == "module" and isinstance(info.get("module"), str):
            out[name] = {"kind": "module", "module": info["module"][:EXPORT_NAME_CHARS]}
        elif kind == "value":
            size = len(json.dumps(info.get("value"), separators=(",", ":")))
            if size <= budget:
                budget -= size
                out[name] = {"kind": "value", "value": info.get("value")}
    return out


def absorb(run: TestRun, result: CallResult) -> None:
    """Resource use, kills and sandbox violations of the candidate's process."""
    run.wall_s += result.wall_s
    run.cpu_s += result.cpu_s
    run.peak_memory_mb = max(run.peak_memory_mb, result.peak_memory_mb)
    run.killed_by = run.killed_by or result.killed_by
    run.violations += [v for v in result.violations if v != "aborted by host"]
    run.stderr = result.stderr
    if result.killed_by in ("timeout", "cpu"):
        run.status = "timeout"
    elif result.killed_by in ("memory", "output"):
        run.status = "error"
        run.violations.append(f"{result.killed_by} limit exceeded")


def stderr_events(stderr: bytes) -> dict[str, int]:
    """Audit kinds of the vocabulary the candidate's hook wrote to stderr (kept even if
    it was killed)."""
    marker = wire.AUDIT_MARKER.encode()
    lines = {line[len(marker):].strip() for line in stderr.splitlines() if line.startswith(marker)}
    return {kind: 1 for kind in wire.AUDIT_KINDS if kind.encode() in lines}


def _classify_events(run: TestRun, events: dict[str, int], error_types: list[str]) -> None:
    run.events = {kind: 1 for kind in events if kind in wire.AUDIT_KINDS}
    for name in run.events:
        run.flags.add(f"runtime:{name}")
        if name in VIOLATION_EVENTS:
            run.violations.append(f"attempted {name.replace('_', ' ')}")
    if "BlockingIOError" in error_types and events.get("spawn"):
        run.violations.append("process limit reached")
        run.flags.add("runtime:process_limit")
    if any(t in ("SystemExit", "KeyboardInterrupt") for t in error_types):
        run.flags.add("runtime:exit_during_test")
    if "Unencodable" in error_types:
        run.flags.add("runtime:unencodable_value")


def _failure_detail(outcome: dict[str, Any], hidden: bool) -> dict[str, Any]:
    kind = outcome.get("type")
    detail: dict[str, Any] = {"type": kind[:TYPE_CHARS] if isinstance(kind, str) else "<unnamed>"}
    if type(outcome.get("line")) is int:
        detail["line"] = outcome.get("line")
    # A hidden test's own assertion message may quote expected values, and a candidate's
    # message may echo hidden inputs: both are withheld, only the type and line are shown.
    if not hidden:
        detail["message"] = str(outcome.get("message", ""))[:MESSAGE_CHARS]
    else:
        detail["message"] = "(withheld: hidden test)"
    return detail


def run_assert_test(sandbox: Sandbox, task: CodeTask, program: str, name: str, tests: str, hidden: bool) -> TestRun:
    """One check(candidate) test: candidate and grader in separate calls, relayed here."""
    run = TestRun(name=name, hidden=hidden, status="error", stderr_safe=not hidden)
    session = sandbox.open(CANDIDATE_SERVE, {"code": program, "module_name": "solution"}, candidate_limits(task),
                           pool=CANDIDATE_POOL, preload=wire.CANDIDATE_PRELOAD)
    relay = _Relay(session)
    try:
        graded = _load_then_grade(sandbox, task, tests, relay, run)
    except BaseException:
        with contextlib.suppress(Exception):  # the session may already be closed
            session.abort()
        raise
    final = relay.finish()
    absorb(run, final)
    _note_candidate_events(run, relay, final)
    if run.status != "timeout" and not run.killed_by:
        _judge_assert_test(run, relay, graded, final)
    return run


def _load_then_grade(sandbox: Sandbox, task: CodeTask, tests: str, relay: _Relay, run: TestRun) -> CallResult | None:
    """Load the candidate's module; if it loaded, run the tests against it in the grader."""
    load = relay.ask({"op": "load"})
    if load is None:
        return None  # the candidate ended while loading
    if load.get("ok") is not True:
        error = load.get("error") if isinstance(load.get("error"), dict) else {}
        # Nothing hidden has reached the candidate before its module loaded.
        run.detail = {"phase": "load", **_failure_detail(error, hidden=False)}
        run.stderr_safe = True
        return None
    payload = {"tests": tests, "entry_point": task.entry_point, "prompt": task.prompt,
               "exports": _exports_for_grader(load.get("exports"))}
    return sandbox.call(GRADER_TARGET, payload, grader_limits(task), pool=GRADER_POOL,
                        preload=wire.GRADER_PRELOAD, on_message=relay.relay)


def _note_candidate_events(run: TestRun, relay: _Relay, final: CallResult) -> None:
    """Audit events: from stderr (kept even when killed) and the last report, if any."""
    for kind, count in stderr_events(final.stderr).items():
        relay.events.setdefault(kind, count)
    if isinstance(final.value, dict):  # the candidate's last audit report, when it returned
        relay.note_audit(final.value.get("audit"))
    _classify_events(run, relay.events, relay.errors)


def _ended(run: TestRun, message: str, phase: str | None = None) -> None:
    run.detail = {"type": "ProcessEnded", "message": message, **({"phase": phase} if phase else {})}
    run.flags.add("runtime:exit_during_test")


def _judge_assert_test(run: TestRun, relay: _Relay, graded: CallResult | None, final: CallResult) -> None:
    """Decide a test the candidate's limits did not end. Only the grader's own verdict
    can make it pass; everything else the candidate did can only make it fail."""
    if graded is None:
        if relay.ended is not None:
            _ended(run, "the candidate process ended while loading", phase="load")
            run.stderr_safe = True
        return  # or its module failed to load: the detail already says how
    if graded.killed_by:
        # The candidate was within its budget, so the test code itself overran (or the
        # candidate's data made it overrun): the test fails, and an auditor is told.
        run.status = "timeout" if graded.killed_by in ("timeout", "cpu") else "error"
        run.detail = {"type": "GraderLimit", "message": f"the grader hit its {graded.killed_by} limit"}
        run.flags.add("grader_limit")
        return
    outcome = graded.value if graded.returned and isinstance(graded.value, dict) else None
    if outcome is None:
        # The grader ended without a verdict while it held the candidate's values: the
        # test fails (the task's own tests were checked before any candidate call).
        _ended(run, "the grader ended during the test")
        return
    _apply_grade(run, outcome, candidate_clean=relay.ended is None and final.returned)


def _apply_grade(run: TestRun, outcome: dict[str, Any], candidate_clean: bool) -> None:
    status = outcome.get("status")
    if status == "bad_tests":
        raise TaskInvalid("the task's tests do not run: they must define check(candidate)")
    if status == "pass" and candidate_clean:
        run.status = "pass"
    elif status == "pass":
        _ended(run, "the candidate process did not finish cleanly")
    elif status == "gone":
        _ended(run, "the candidate process ended during the test")
    else:
        run.status = "fail" if status == "fail" else "error"
        run.detail = _failure_detail(outcome, run.hidden)
    run.detail["calls"] = outcome.get("calls", 0)


def run_io_case(sandbox: Sandbox, task: CodeTask, program: str, name: str, case: IOCase, hidden: bool,
                decide: Callable[[TestRun, bytes], None] | None = None) -> TestRun:
    """One stdin/stdout case of a Python program; `decide` (a task's checker) replaces the
    comparison when given."""
    run = TestRun(name=name, hidden=hidden, status="error", stderr_safe=not hidden)
    result = sandbox.call(CANDIDATE_PROGRAM, {"code": program, "stdin": case.stdin}, candidate_limits(task),
                          pool=CANDIDATE_POOL, preload=wire.CANDIDATE_PRELOAD)
    absorb(run, result)
    reported = result.value if result.returned and isinstance(result.value, dict) else {}
    error = reported.get("error") if isinstance(reported.get("error"), dict) else {}
    audit = reported.get("audit") if isinstance(reported.get("audit"), dict) else {}
    events = {**stderr_events(result.stderr), **dict.fromkeys(known_events(audit.get("events")), 1)}
    _classify_events(run, events, [error["type"]] if isinstance(error.get("type"), str) else [])
    if run.status == "timeout" or run.killed_by:
        return run
    if reported.get("status") in ("error", "exit"):
        run.detail = {"phase": "run", **_failure_detail(error, hidden)}
        return run
    clean_exit = reported.get("status") == "ok" or (not result.returned and result.exit_code == 0)
    if not clean_exit:
        run.detail = {"type": "ProcessEnded", "message": f"exit code {result.exit_code}, signal {result.signal}"}
        return run
    if decide is not None:
        decide(run, result.stdout)
        return run
    got = result.stdout.decode("utf-8", errors="replace")
    if outputs_match(got, case.stdout, task.compare, task.float_tolerance):
        run.status = "pass"
        return run
    run.status = "fail"
    run.detail = {"type": "WrongAnswer", "first_different_line": first_difference(got, case.stdout)}
    if not hidden:  # a visible case may be shown, expected output included
        run.detail.update(expected=case.stdout[:300], got=got[:300])
    return run
