"""Task certification for tool state: a reference trace (given, or made from the gold
actions) must earn the reward; no calls, and every read the reference makes without its
writes, must earn nothing."""

from __future__ import annotations

from verifiers.base import Probe, TaskBase
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.wire import dumps_trace


def _calls(actions: list) -> list[dict]:
    return [{"tool": a.tool, "args": dict(a.args)} for a in actions]


def reference(task: TaskBase, supplied: str | None) -> str | None:
    """The supplied trace, else the required reads then the gold actions, stating the required outputs."""
    if supplied is not None:
        return supplied
    if not task.gold_actions and task.expected_state is not None:  # type: ignore[attr-defined]
        return None  # an expected state alone does not say how to reach it
    calls = _calls(task.required_reads) + _calls(task.gold_actions)  # type: ignore[attr-defined]
    return dumps_trace(calls, " ".join(task.required_outputs))  # type: ignore[attr-defined]


def probes(task: TaskBase, reference_trace: str | None) -> list[Probe]:
    import json

    out = [Probe("no_calls", dumps_trace([], ""))]
    pack = get_pack(task.environment)  # type: ignore[attr-defined]
    no_args = [{"tool": t.name, "args": {}} for t in pack.tools.values() if not t.mutates and not t.params]
    if no_args:
        out.append(Probe("read_only_tools", dumps_trace(no_args, "")))
    if reference_trace is None:
        return out
    try:
        calls = json.loads(reference_trace).get("calls", [])
    except (ValueError, AttributeError):
        return out
    tools = pack.tools
    reads = [c for c in calls if isinstance(c, dict) and c.get("tool") in tools and not tools[c["tool"]].mutates]
    if len(reads) < len(calls):  # the reference writes: its reads alone must not do
        out.append(Probe("reference_reads_only", dumps_trace(reads, "")))
    return out
