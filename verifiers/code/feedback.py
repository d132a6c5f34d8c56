"""What a policy may be shown about a `code` decision (see verifiers/feedback.py).

The candidate's own load error (its module failed before any hidden input reached it),
visible tests with their messages, expected and actual output, and its stderr when a
visible test or the load failed; for hidden tests only how many passed out of how many.
Never a hidden test's name, input, output, assertion text, exception type or line, nor
stderr written while the candidate held hidden inputs (an exception can carry them).
"""

from __future__ import annotations

from typing import Any

from verifiers.base import Outcome, TaskBase
from verifiers.feedback import pick

VISIBLE_KEYS = ("name", "status", "phase", "type", "message", "line", "expected", "got", "first_different_line",
                "killed_by", "checker_message", "points")


def code_feedback(task: TaskBase, outcome: Outcome, response: str) -> dict[str, Any]:
    evidence = outcome.evidence
    out: dict[str, Any] = {"verdict": outcome.verdict.value}
    if "format_error" in evidence:
        # A compiler's message is about the response's own code (nothing hidden compiled).
        return {**out, **pick(evidence, "format_error", "compiler_message")}
    tests = evidence.get("tests") or []
    visible = [t for t in tests if not t.get("hidden")]
    out.update(visible_passed=sum(t.get("status") == "pass" for t in visible),
               visible_total=_visible_total(task),
               **pick(evidence, "hidden_passed", "hidden_total", "violations"))
    failures = [pick(t, *VISIBLE_KEYS) for t in visible if t.get("status") != "pass"]
    if failures:
        out["visible_failures"] = failures
    # A module that failed to load never saw a hidden input, whichever test loaded it.
    load = next((t for t in tests if t.get("phase") == "load"), None)
    if load is not None:
        out["load_error"] = pick(load, "type", "message", "line")
    failing = next((t for t in tests if t.get("status") != "pass"), None)
    if failing is not None and "stderr" in evidence and (not failing.get("hidden") or failing is load):
        out["stderr"] = evidence["stderr"]
    return out


def _visible_total(task: TaskBase) -> int:
    if getattr(task, "visible_tests", None) is not None:
        return 1
    return len(getattr(task, "visible_io_cases", None) or [])
