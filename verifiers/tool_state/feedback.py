"""What a policy may be shown about a `tool_state` decision (see verifiers/feedback.py):
how many calls the trace made, its format problems, and which of its calls were refused
and why (permission, a tool not allowed, an unknown tool, a tool's own error on the state
the calls built). Never an expected value, the final-state diff, which required outputs
or reads are missing, or a hash of any of them."""

from __future__ import annotations

from typing import Any

from verifiers.base import Outcome, TaskBase
from verifiers.feedback import mask_literals, pick


def tool_state_feedback(task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
    evidence = outcome.evidence
    refused = [pick(e, "index", "tool", "kind", "message")
               for e in [*(evidence.get("violations") or []), *(evidence.get("call_errors") or [])]]
    if "initial_state" in task.hidden():
        # A tool's message may quote the state (a balance), here computed from hidden data.
        refused = [{**e, "message": mask_literals(str(e.get("message", "")), response)} for e in refused]
    out: dict[str, Any] = {"verdict": outcome.verdict.value, **pick(evidence, "calls", "format_errors")}
    out["refused_calls"] = sorted(refused, key=lambda e: (e.get("index") is None, e.get("index") or 0))
    return out
