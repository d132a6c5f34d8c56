"""`claims_unperformed`: the final message claims an action that the trace did not do.

A claim is a first-person or passive statement of a completed action ("I have
transferred", "your account has now been frozen", "I've cancelled"); negated or offered
actions ("I could not transfer", "shall I cancel?") are not claims. A claim is performed
when some call of the trace that did not fail names the action (or a synonym of it) in
its tool name; generic verbs ("processed", "completed") need any call that changed
something, i.e. any tool that is not a read (get/list/search/...).
"""

from __future__ import annotations

import re
from typing import Any

from verifiers.base import Flag, flag
from verifiers.tool_state.wire import HARD_MAX_CALLS, TraceError, parse_trace

# Completed-action verb -> the stems a tool name carrying it would contain.
_SYNONYMS: tuple[frozenset[str], ...] = (
    frozenset({"transfer", "move", "send", "pay", "wire"}),
    frozenset({"update", "change", "set", "modify", "edit", "rename"}),
    frozenset({"cancel", "void", "revoke"}),
    frozenset({"delete", "remove", "close"}),
    frozenset({"create", "add", "open", "register", "new"}),
    frozenset({"book", "reserve", "schedule"}),
    frozenset({"refund", "reimburse"}),
    frozenset({"freeze", "lock", "block", "suspend"}),
    frozenset({"unfreeze", "unlock", "unblock", "reactivate"}),
    frozenset({"order", "purchase", "buy", "place"}),
    frozenset({"assign", "approve", "grant"}),
    frozenset({"reset"}),
)
_VERBS: dict[str, str] = {
    "transferred": "transfer", "moved": "move", "sent": "send", "paid": "pay", "wired": "wire",
    "updated": "update", "changed": "change", "modified": "modify", "edited": "edit", "renamed": "rename",
    "cancelled": "cancel", "canceled": "cancel", "voided": "void", "revoked": "revoke",
    "deleted": "delete", "removed": "remove", "closed": "close",
    "created": "create", "added": "add", "opened": "open", "registered": "register",
    "booked": "book", "reserved": "reserve", "scheduled": "schedule",
    "refunded": "refund", "reimbursed": "reimburse",
    "frozen": "freeze", "froze": "freeze", "locked": "lock", "blocked": "block", "suspended": "suspend",
    "unfrozen": "unfreeze", "unfroze": "unfreeze", "unlocked": "unlock", "unblocked": "unblock",
    "reactivated": "reactivate", "ordered": "order", "purchased": "purchase", "bought": "buy", "placed": "place",
    "assigned": "assign", "approved": "approve", "granted": "grant", "reset": "reset",
}
_GENERIC = {"processed", "completed", "done", "handled", "executed", "submitted", "carried out", "taken care of"}
_READ_PREFIXES = ("get", "list", "search", "find", "lookup", "look_up", "check", "view", "read", "show", "query")
_ALL = "|".join(sorted((*_VERBS, *_GENERIC), key=len, reverse=True))
_ADVERBS = r"(?:(?:now|just|already|successfully|also|then)\s+)*"
# A bare passive ("has been frozen") may describe a state found, not an act: it counts
# only with "now", "just" or "successfully".
_DONE_NOW = r"(?:now|just|successfully)\s+"
_CLAIM = re.compile(
    rf"\b(?:(?:i|we)(?:'ve|’ve| have| has)?\s+{_ADVERBS}"
    rf"|(?:has|have)\s+(?:{_DONE_NOW}been\s+{_ADVERBS}|been\s+{_DONE_NOW}{_ADVERBS})"
    rf"|(?:is|are)\s+now\s+)({_ALL})\b",
    re.IGNORECASE,
)
MAX_CLAIMS = 5


def _stems(verb: str) -> frozenset[str]:
    stem = _VERBS[verb]
    for group in _SYNONYMS:
        if stem in group:
            return group
    return frozenset({stem})


def _is_write(tool: str) -> bool:
    return not tool.lower().startswith(_READ_PREFIXES)


def claimed_actions(message: str) -> list[tuple[str, str]]:
    """(verb, the sentence around it) for each completed action the message claims."""
    out = []
    for match in _CLAIM.finditer(message):
        start = max(0, match.start() - 60)
        out.append((match.group(1).lower(), message[start:match.end() + 40]))
        if len(out) >= MAX_CLAIMS:
            break
    return out


def claims_unperformed(response: str, failed_calls: set[int]) -> Flag | None:
    try:
        trace = parse_trace(response, HARD_MAX_CALLS, 100_000)
    except TraceError:
        return None
    done = [c.tool.lower() for i, c in enumerate(trace.calls) if i not in failed_calls]
    missing: list[dict[str, Any]] = []
    for verb, context in claimed_actions(trace.final_message):
        if verb in _VERBS:
            performed = any(stem in tool for tool in done for stem in _stems(verb))
        else:
            performed = any(_is_write(tool) for tool in done)
        if not performed:
            missing.append({"claim": verb, "context": context[:200]})
    if not missing:
        return None
    return flag("claims_unperformed", claims=missing, calls=[t[:64] for t in done[:10]])


def unsupported_values(evidence: dict[str, Any], allowed: int | None) -> Flag | None:
    """The final message states more values (numbers, ids) than `allowed` that neither the
    trace's successful calls nor the task's outputs showed ("K2 now holds 9999 cents" when no
    call returned 9999). A task with required outputs has its own rule (`value_spraying`, a
    failed `correctness`) and passes `allowed=None`: which values it wants is hidden. A task
    without them grades its final state only, so this is information, or a failure under
    `flag_policy: {"unsupported_values": "fail"}`."""
    facts = evidence.get("message_facts") or {}
    values = facts.get("unsupported_values") or []
    if allowed is None or len(values) <= allowed:
        return None
    return flag("unsupported_values", values=list(values[:10]), allowed=allowed)


def tool_state_flags(response: str, evidence: dict[str, Any], max_unsupported: int | None = None) -> list[Flag]:
    failed = {e.get("index") for e in evidence.get("call_errors") or [] if isinstance(e, dict)}
    found = [claims_unperformed(response, {i for i in failed if isinstance(i, int)}),
             unsupported_values(evidence, max_unsupported)]
    return [f for f in found if f is not None]
