"""The registered `tool_state` verifier.

Replays the response's calls from the task's initial state inside the sandbox (the
response is hostile data; a state it claims is never used), then gates on three hard
components: `format` (trace parsed, calls well-formed), `compliance` (no permission
violation, no tool outside `allowed_tools`, reads included) and `correctness` (final
state equal to the expected one on every table, required reads made, required outputs
stated as values without spraying candidates).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sandboxes.base import CallEnded, CallResult, SandboxError
from verifiers.base import Outcome, Probe, TaskBase, Verdict, Verifier, VerifyContext, hard, sha256_json
from verifiers.registry import register
from verifiers.tool_state import certify, runner
from verifiers.tool_state.detectors import tool_state_flags
from verifiers.tool_state.feedback import tool_state_feedback
from verifiers.tool_state.runner import (
    CALL_LIMITS,
    CALL_POOL,
    CALL_TARGET,
    PRELOAD,
    SERVE_POOL,
    close_sessions,
    sessions_for,
)
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.wire import TraceError, check_size

BATCH_WALL_PER_RESPONSE_S = 0.5
# Keep each sandbox message well under the frame limits, however large the group.
CHUNK_BYTES = 4_000_000


class Report(BaseModel):
    """The replay's report, checked at the sandbox boundary."""

    model_config = ConfigDict(extra="forbid")
    format_errors: list[str]
    calls: int
    violations: list[dict[str, Any]]
    violation_count: int
    call_errors: list[dict[str, Any]]
    state_diff: list[dict[str, Any]]
    state_diff_total: int
    missing_reads: list[dict[str, Any]]
    failed_outputs: list[dict[str, Any]]
    ignored_keys: list[str]
    claims_state: bool
    final_state_sha256: str | None
    message_facts: dict[str, Any]
    timed_out: bool = False


@register
class ToolStateVerifier(Verifier):
    name = "tool_state"
    version = "1.3.0"
    # Which of the message's values the trace showed depends on call results (the initial
    # state, which a registrant may hide): audit views only.
    hidden_flags = frozenset({"unsupported_values"})
    description = (
        "Agent tool use against a deterministic environment: replays the calls in the sandbox and checks the "
        "final state, permissions on every call, and the values stated in the final message."
    )
    task_model = ToolStateTask
    feedback = staticmethod(tool_state_feedback)  # type: ignore[assignment]

    def reference(self, task: TaskBase, supplied: str | None) -> str | None:
        return certify.reference(task, supplied)

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        return certify.probes(task, reference)
    judges_groups = True

    def __init__(self, sessions: bool = True) -> None:
        # False: a fresh sandboxed process per call, never a warm replay session.
        self.sessions = sessions

    def warm(self, ctx: VerifyContext) -> None:
        # Only the session pool: the fresh-process pool is a fallback, started on first use.
        ctx.sandbox.warm(SERVE_POOL, PRELOAD)

    def close(self, ctx: VerifyContext) -> None:
        """Finish this verifier's replay sessions in the sandbox (called before it closes)."""
        close_sessions(ctx.sandbox)

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_many(task, [response], ctx)[0]

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        """Judge a group's responses together: the responses are data for our own replay
        code (no candidate code runs), so sharing a sandboxed process between them cannot
        let one response affect another's judgement."""
        assert isinstance(task, ToolStateTask)
        outcomes: list[Outcome | None] = [None] * len(responses)
        pending: list[int] = []
        for i, response in enumerate(responses):
            try:
                check_size(response)
                pending.append(i)
            except TraceError as exc:
                outcomes[i] = _unparsed(str(exc), ["oversized_trace"])
        # The message's unsupported values, for a task that grades no output (see detectors).
        unsupported_allowed = None if task.required_outputs else task.max_unsupported_values
        for chunk in _chunks(pending, responses):
            for i, outcome in zip(chunk, self._replay(task, [responses[i] for i in chunk], ctx), strict=True):
                outcome.add_flags(tool_state_flags(responses[i], outcome.evidence, unsupported_allowed))
                outcomes[i] = outcome
        return [o for o in outcomes if o is not None]

    def _replay(self, task: ToolStateTask, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        limit = runner.RESPONSE_TIMEOUT_S
        payload = {"task": task.replay_spec(), "responses": responses, "response_timeout_s": limit}
        started = time.perf_counter()
        value = None
        if self.sessions:
            # The sandbox's watchdog bounds each response; this bounds the request.
            with contextlib.suppress(CallEnded):  # the session died: judge afresh
                value = sessions_for(ctx.sandbox).request(
                    payload, timeout_s=limit * len(responses) + runner.GROUP_GRACE_S)
        if value is not None:
            per = (time.perf_counter() - started) / len(responses)
            usage = {"backend": ctx.sandbox.name, "mode": "replay_session", "wall_s": round(per, 4)}
            return [_outcome(r, usage, ctx.reveal_hidden) for r in _validate(value, len(responses))]
        # No session answered: one fresh process for the group, and if that is killed,
        # one per response, so that a kill lands on the response that caused it.
        if len(responses) > 1:
            result = self._call(payload, ctx)
            if result.returned:
                reports = _validate(result.value, len(responses))
                return [_outcome(r, result.summary(), ctx.reveal_hidden) for r in reports]
        outcomes = []
        for response in responses:
            result = self._call({**payload, "responses": [response]}, ctx)
            # Alone in its call, a replay that did not return was ended by this response
            # (a limit, a crash, an exception on its input): the response's, never `error`.
            reports = _validate(result.value, 1) if result.returned else None
            outcomes.append(_outcome(reports[0], result.summary(), ctx.reveal_hidden) if reports else _killed(result))
        return outcomes

    def _call(self, payload: dict[str, Any], ctx: VerifyContext) -> CallResult:
        # Room for every response to run to its watchdog limit.
        extra = max(BATCH_WALL_PER_RESPONSE_S, payload["response_timeout_s"]) * (len(payload["responses"]) - 1)
        wall = CALL_LIMITS.wall_s + extra
        limits = CALL_LIMITS.replace(wall_s=wall, cpu_s=wall)
        return ctx.sandbox.call(CALL_TARGET, payload, limits, pool=CALL_POOL, preload=PRELOAD)


def _chunks(indices: list[int], responses: list[str]) -> list[list[int]]:
    chunks: list[list[int]] = []
    size = 0
    for i in indices:
        length = len(responses[i])
        if not chunks or size + length > CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += length
    return chunks


def _validate(value: Any, count: int) -> list[Report]:
    # Our replay code's own contract broken: a verifier bug, reported in our words.
    try:
        reports = [Report.model_validate(r) for r in value["reports"]]
    except (ValidationError, KeyError, TypeError) as exc:
        raise SandboxError("tool_state replay returned a malformed report", cause="replay_malformed") from exc
    if len(reports) != count:
        raise SandboxError("tool_state replay returned the wrong number of reports", cause="replay_malformed")
    return reports


def _unparsed(error: str, flags: list[str]) -> Outcome:
    components = [hard("format", False), hard("compliance", False), hard("correctness", False)]
    return Outcome(Verdict.invalid_format, components, {"format_errors": [error], "calls": 0}, flags)


def _killed(result: CallResult) -> Outcome:
    if result.killed_by:
        reason = f"the trace could not be replayed within the grader's limits ({result.killed_by})"
    else:
        reason = "the trace ended its replay before a report (crash or exception on this input)"
    outcome = _unparsed(reason, ["replay_limit"])
    outcome.usage = result.summary()
    if result.killed_by in ("timeout", "cpu"):
        outcome.verdict = Verdict.timeout
    return outcome


def _redacted(evidence: dict[str, Any]) -> dict[str, Any]:
    """Evidence for a registered task: expected values and required outputs as hashes."""
    evidence = dict(evidence)
    evidence["state_diff"] = [{**d, "want": {"sha256": sha256_json(d.get("want"))}}
                              for d in evidence.get("state_diff") or []]
    evidence["failed_outputs"] = [{**f, "output": f["output"] if f.get("output") == "*"
                                   else {"sha256": sha256_json(f.get("output"))}}
                                  for f in evidence.get("failed_outputs") or []]
    evidence["missing_reads"] = [{"sha256": sha256_json(r)} for r in evidence.get("missing_reads") or []]
    return evidence


def _outcome(report: Report, usage: dict[str, Any], reveal_hidden: bool = True) -> Outcome:
    if report.timed_out:
        limit = report.message_facts.get("replay_limit_s")
        outcome = _unparsed(f"the trace's replay ran past its limit of {limit}s and was stopped", ["replay_limit"])
        outcome.verdict, outcome.usage = Verdict.timeout, usage
        return outcome
    parsed = not (report.format_errors and report.final_state_sha256 is None)
    format_ok = not report.format_errors
    compliance_ok = parsed and report.violation_count == 0
    correct = parsed and report.state_diff_total == 0 and not report.missing_reads and not report.failed_outputs
    if report.violation_count:
        # Permission first: an attempt is a violation whatever else is wrong with the trace.
        verdict = Verdict.violation
    elif not format_ok:
        verdict = Verdict.invalid_format
    elif not compliance_ok:
        verdict = Verdict.violation
    elif not correct:
        verdict = Verdict.incorrect
    else:
        verdict = Verdict.correct
    flags = []
    if report.claims_state:
        flags.append("claimed_state_ignored")
    kinds = {v.get("kind") for v in report.violations}
    if "permission" in kinds:
        flags.append("permission_violation")
    if "not_allowed" in kinds:
        flags.append("forbidden_tool")
    if any(e.get("kind") == "unknown_tool" for e in report.call_errors):
        flags.append("unknown_tool")
    if any(f.get("output") == "*" for f in report.failed_outputs):
        flags.append("value_spraying")
    components = [hard("format", format_ok), hard("compliance", compliance_ok), hard("correctness", correct)]
    evidence = report.model_dump()
    return Outcome(verdict, components, evidence if reveal_hidden else _redacted(evidence), flags, usage)
