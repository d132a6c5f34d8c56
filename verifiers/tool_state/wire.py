"""Parsing a response into a trace: `{"calls": [{"tool", "args"}], "final_message"}`.

The response is untrusted text. It is only ever decoded as JSON (never evaluated), within
bounds on size, nesting, call count and message length, so a hostile trace fails fast with
a clear error instead of exhausting the grader. An object that repeats a key, anywhere,
makes the trace malformed: which of the two values counts depends on the parser, so the
trace has no one meaning. A call whose `args` is not an object is still replayed (its
permission is judged on what it names) but makes the trace malformed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# Host-side cap on the raw response: checked before any work is spent on it.
MAX_RESPONSE_BYTES = 1_000_000
# Upper bound on any task's `max_calls`.
HARD_MAX_CALLS = 2000
MAX_TOOL_NAME = 64
MAX_ARGS_CHARS = 4000
# Top-level keys by which a response may claim a state; they are ignored, and flagged.
CLAIM_KEYS = frozenset({"final_state", "state", "expected_state", "db", "database", "tables"})


class TraceError(ValueError):
    """The response is not a well-formed trace."""


@dataclass(frozen=True)
class Call:
    tool: str
    args: Any  # an object in a well-formed call


@dataclass
class Trace:
    calls: list[Call]
    final_message: str
    ignored_keys: list[str] = field(default_factory=list)
    # Calls that are replayed but malformed (their `args` is not an object).
    call_problems: list[str] = field(default_factory=list)

    @property
    def claims_state(self) -> bool:
        return any(k in CLAIM_KEYS for k in self.ignored_keys)

    def to_response(self) -> str:
        """The canonical response string for this trace (what a session submits)."""
        return dumps_trace([{"tool": c.tool, "args": c.args} for c in self.calls], self.final_message)


def dumps_trace(calls: list[dict[str, Any]], final_message: str) -> str:
    return json.dumps({"calls": calls, "final_message": final_message}, separators=(",", ":"), ensure_ascii=False)


def check_size(response: str) -> None:
    size = len(response.encode("utf-8", errors="replace"))
    if size > MAX_RESPONSE_BYTES:
        raise TraceError(f"response is {size} bytes; the limit is {MAX_RESPONSE_BYTES} bytes")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise TraceError(f"the JSON repeats the key {repeated[:40]!r} in one object: its meaning depends on the parser")
    return found


# A trace a policy wrapped in prose: the last fenced block (```json or untagged) holds it. A fence
# is ``` or ~~~ as in verifiers/fences.py, written out here: this module is imported inside the
# sandbox too, which imports no host module (tests/test_trust_zones.py).
_FENCED = re.compile(r"(```|~~~)(?:json)?[ \t]*\n(.*?)\1", re.DOTALL | re.IGNORECASE)


def _trace_text(response: str) -> str:
    """The JSON of the trace: the response itself, or, when it is not a JSON object on its
    own, its last ```json (or untagged) fenced block."""
    if response.lstrip().startswith("{"):
        return response
    blocks = [body for _, body in _FENCED.findall(response)]
    return blocks[-1] if blocks else response


def parse_trace(response: str, max_calls: int, max_message_chars: int) -> Trace:
    check_size(response)
    try:
        data = json.loads(_trace_text(response), object_pairs_hook=_unique_keys)
    except TraceError:
        raise
    except RecursionError:
        raise TraceError("response JSON is nested too deeply") from None
    except ValueError as exc:
        raise TraceError(f"response is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TraceError("response must be a JSON object with `calls` and `final_message`")
    calls = data.get("calls")
    if not isinstance(calls, list):
        raise TraceError("response has no `calls` list")
    if len(calls) > max_calls:
        raise TraceError(f"trace has {len(calls)} calls; this task allows at most {max_calls}")
    message = data.get("final_message", "")
    if not isinstance(message, str):
        raise TraceError("`final_message` must be a string")
    if len(message) > max_message_chars:
        raise TraceError(f"final message is {len(message)} characters; the limit is {max_message_chars}")
    parsed = [_parse_call(i, c) for i, c in enumerate(calls)]
    ignored = sorted(str(k)[:40] for k in data if k not in ("calls", "final_message"))[:20]
    problems = [f"calls[{i}].args must be an object" for i, c in enumerate(parsed) if not isinstance(c.args, dict)]
    return Trace(parsed, message, ignored, problems)


def _parse_call(index: int, raw: Any) -> Call:
    if not isinstance(raw, dict):
        raise TraceError(f"calls[{index}] must be an object with `tool` and `args`")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool or len(tool) > MAX_TOOL_NAME:
        raise TraceError(f"calls[{index}].tool must be a tool name (a string of at most {MAX_TOOL_NAME} characters)")
    args = raw.get("args", {})
    if len(json.dumps(args)) > MAX_ARGS_CHARS:
        raise TraceError(f"calls[{index}].args is longer than {MAX_ARGS_CHARS} characters")
    return Call(tool, args)
