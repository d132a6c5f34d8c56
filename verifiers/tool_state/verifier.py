"""The registered `tool_state` verifier.

Replays the response's calls from the task's initial state inside the sandbox (the
response is hostile data; a state it claims is never used), then gates on three hard
components: `format` (trace parsed, calls well-formed), `compliance` (no permission
violation, no tool outside `allowed_tools`, reads included) and `correctness` (final
state equal to the expected one on every table, required reads made, required outputs
stated as values without spraying candidates).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sandboxes.base import CallResult, Limits, SandboxError
from verifiers.base import Outcome, TaskBase, Verdict, Verifier, VerifyContext, clip, hard
from verifiers.registry import register
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.trace import TraceError, check_size

POOL = "tool_state"
PRELOAD = ("verifiers.tool_state.replay",)
TARGET = "verifiers.tool_state.replay:run"
# Our own replay on bounded input: generous per response, small memory.
LIMITS = Limits(wall_s=10.0, cpu_s=10.0, memory_mb=512, processes=4, output_bytes=100_000)
BATCH_WALL_PER_RESPONSE_S = 0.5
BATCH_WALL_CAP_S = 60.0


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


@register
class ToolStateVerifier(Verifier):
    name = "tool_state"
    version = "1.0.0"
    description = (
        "Agent tool use against a deterministic environment: replays the calls in the sandbox and checks the "
        "final state, permissions on every call, and the values stated in the final message."
    )
    task_model = ToolStateTask

    def warm(self, ctx: VerifyContext) -> None:
        ctx.sandbox.warm(POOL, PRELOAD)

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_batch(task, [response], ctx)[0]

    def verify_batch(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        """Judge a group's responses in one sandbox call: the responses are data for our
        own replay code (no candidate code runs), so sharing one process between them
        cannot let one response affect another's judgement. If the shared call dies, each
        response is retried alone so that the failure lands on the one that caused it."""
        assert isinstance(task, ToolStateTask)
        outcomes: list[Outcome | None] = [None] * len(responses)
        pending: list[int] = []
        for i, response in enumerate(responses):
            try:
                check_size(response)
                pending.append(i)
            except TraceError as exc:
                outcomes[i] = _unparsed(str(exc), ["oversized_trace"])
        if len(pending) > 1:
            result = self._call(task, [responses[i] for i in pending], ctx)
            reports = _reports(result, len(pending))
            if reports is not None:
                for i, report in zip(pending, reports, strict=True):
                    outcomes[i] = _outcome(report, result)
                pending = []
        for i in pending:
            result = self._call(task, [responses[i]], ctx)
            reports = _reports(result, 1)
            outcomes[i] = _outcome(reports[0], result) if reports is not None else _killed(result)
        return [o for o in outcomes if o is not None]

    def _call(self, task: ToolStateTask, responses: list[str], ctx: VerifyContext) -> CallResult:
        wall = min(BATCH_WALL_CAP_S, LIMITS.wall_s + BATCH_WALL_PER_RESPONSE_S * (len(responses) - 1))
        limits = LIMITS.replace(wall_s=wall, cpu_s=wall)
        payload = {"task": task.replay_spec(), "responses": responses}
        return ctx.sandbox.call(TARGET, payload, limits, pool=POOL, preload=PRELOAD)


def _reports(result: CallResult, count: int) -> list[Report] | None:
    """The reports if the replay returned them; None if the sandbox killed it."""
    if result.returned:
        try:
            reports = [Report.model_validate(r) for r in result.value["reports"]]
        except (ValidationError, KeyError, TypeError) as exc:
            raise SandboxError(f"tool_state replay returned a malformed report: {clip(str(exc), 300)}") from exc
        if len(reports) != count:
            raise SandboxError("tool_state replay returned the wrong number of reports")
        return reports
    if result.killed_by is not None:
        return None
    # Our replay raised or vanished without a limit being hit: a verifier bug, not a reward.
    detail = result.raised or clip(result.stderr, 500)
    raise SandboxError(f"tool_state replay failed: {detail}")


def _unparsed(error: str, flags: list[str]) -> Outcome:
    components = [hard("format", False), hard("compliance", False), hard("correctness", False)]
    return Outcome(Verdict.invalid_format, components, {"format_errors": [error], "calls": 0}, flags)


def _killed(result: CallResult) -> Outcome:
    reason = f"the trace could not be replayed within the grader's limits ({result.killed_by})"
    outcome = _unparsed(reason, ["replay_limit"])
    outcome.usage = result.summary()
    if result.killed_by in ("timeout", "cpu"):
        outcome.verdict = Verdict.timeout
    return outcome


def _outcome(report: Report, result: CallResult) -> Outcome:
    parsed = not (report.format_errors and report.final_state_sha256 is None)
    format_ok = not report.format_errors
    compliance_ok = parsed and report.violation_count == 0
    correct = parsed and report.state_diff_total == 0 and not report.missing_reads and not report.failed_outputs
    if not format_ok:
        verdict = Verdict.invalid_format
    elif not compliance_ok:
        verdict = Verdict.violation
    elif not correct:
        verdict = Verdict.incorrect
    else:
        verdict = Verdict.correct
    evidence = report.model_dump()
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
    return Outcome(verdict, components, evidence, flags, result.summary())
