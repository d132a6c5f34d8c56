"""Replay of a response's calls: parse the trace, run every call from the initial state
through the domain pack, and judge the result.

`check` is pure and deterministic. The verifier runs it inside the sandbox through
`run` (the response is hostile data, so even our own parser and tools work on it under
the sandbox's time and memory limits); the benchmark's in-process baseline calls `check`
directly with the same code.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from verifiers.tool_state.inside.checks import check_outputs, diff_states, grounded_values, missing_reads
from verifiers.tool_state.inside.env import Environment, Event
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.wire import TraceError, parse_trace

EVENT_LIMIT = 50
ARGS_TEXT_LIMIT = 200
# One response's replay limit when the host names none (it does: runner.RESPONSE_TIMEOUT_S).
DEFAULT_RESPONSE_TIMEOUT_S = 5.0


def _event_view(event: Event) -> dict[str, Any]:
    args = json.dumps(event.args, sort_keys=True)
    return {"index": event.index, "tool": event.tool,
            "args": args if len(args) <= ARGS_TEXT_LIMIT else args[:ARGS_TEXT_LIMIT] + "...",
            "kind": event.error_kind, "message": event.error}


class _Overrun(Exception):
    """The replay of one response ran past its limit."""


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise _Overrun


def check(spec: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
    """spec: environment, actor, initial_state, allowed_tools, expected_state,
    required_outputs, required_reads, max_calls, max_message_chars,
    max_unsupported_values, max_message_values, response. Past `deadline` (monotonic)
    it raises _Overrun, checked after parsing, before each call and after each stage."""
    report = _empty_report()
    try:
        trace = parse_trace(spec["response"], spec["max_calls"], spec["max_message_chars"])
    except TraceError as exc:
        report["format_errors"].append(str(exc))
        return report
    _check(deadline)
    report["calls"] = len(trace.calls)
    report["format_errors"] += trace.call_problems[:EVENT_LIMIT]
    report["ignored_keys"] = trace.ignored_keys
    report["claims_state"] = trace.claims_state
    env = Environment.start(get_pack(spec["environment"]), spec["initial_state"], spec["actor"],
                            spec["allowed_tools"])
    for call in trace.calls:
        _check(deadline)
        env.step(call.tool, call.args)
    _check(deadline)
    violations = [e for e in env.events if e.violation]
    errors = [e for e in env.events if not e.ok and not e.violation]
    report["violations"] = [_event_view(e) for e in violations[:EVENT_LIMIT]]
    report["violation_count"] = len(violations)
    report["call_errors"] = [_event_view(e) for e in errors[:EVENT_LIMIT]]
    # A call to a tool the environment does not have is a malformed call, not an attempt.
    unknown = [e for e in errors if e.error_kind == "unknown_tool"]
    if unknown:
        report["format_errors"].append(
            f"{len(unknown)} call(s) name no tool of this environment, first calls[{unknown[0].index}]: "
            f"{unknown[0].tool[:64]!r}"
        )
    report["state_diff"], report["state_diff_total"] = diff_states(env.state, spec["expected_state"])
    report["missing_reads"] = missing_reads(env.events, spec["required_reads"])
    _check(deadline)
    failed, facts = check_outputs(trace.final_message, spec["required_outputs"], lambda: grounded_values(env.events),
                                  spec["max_unsupported_values"], spec["max_message_values"])
    report["failed_outputs"], report["message_facts"] = failed, facts
    _check(deadline)
    report["final_state_sha256"] = hashlib.sha256(
        json.dumps(env.state, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return report


def _empty_report() -> dict[str, Any]:
    return {"format_errors": [], "calls": 0, "violations": [], "violation_count": 0, "call_errors": [],
            "state_diff": [], "state_diff_total": 0, "missing_reads": [], "failed_outputs": [], "ignored_keys": [],
            "claims_state": False, "final_state_sha256": None, "message_facts": {}, "timed_out": False}


def _timed_out(limit: float) -> dict[str, Any]:
    return {**_empty_report(), "timed_out": True, "message_facts": {"replay_limit_s": limit}}


def _check_within(task: dict[str, Any], response: str, limit: float) -> dict[str, Any]:
    try:
        return check({**task, "response": response}, time.monotonic() + limit)
    except _Overrun:
        return _timed_out(limit)


def run(payload: dict[str, Any], channel: object) -> dict[str, Any]:
    """Sandbox entry point: one judgement per response (a group shares the task), each
    within its own `response_timeout_s`, so a response that makes the replay slow costs
    its own limit and never holds up the others'. The deadline is checked before every
    call and stage: all the work between two checks is linear in input the trace caps
    bound (1 MB, `max_calls`, `max_message_chars`), so it overruns by a fraction of a
    second at most (the host's request timeout backs it up)."""
    limit = float(payload.get("response_timeout_s") or DEFAULT_RESPONSE_TIMEOUT_S)
    return {"reports": [_check_within(payload["task"], r, limit) for r in payload["responses"]]}


def serve(payload: dict[str, Any], channel: Any) -> dict[str, Any]:
    """Sandbox entry point of a replay session: answers `run` requests until finished.
    Each request is judged from its own task data; nothing is kept between requests."""
    channel.serve(lambda body: run(body, channel))
    return {"served": True}
