"""Pure checks on a replayed trace: the state diff, required reads, required outputs.

Required outputs are matched as *values*: the message is split into tokens and an output
must appear as a whole token sequence ("450" is not found in "4500" or "1,450"). Numbers
are compared by value ("450.00" is 450). To stop a message from listing candidates until
one hits, the message may hold only a few candidate values (numbers and ids) that are
neither required nor seen in a successful call of the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from verifiers.tool_state.inside.env import Event

DIFF_LIMIT = 50
VALUE_TEXT_LIMIT = 200
_TOKEN = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)|[-+]?\d+(?:\.\d+)?|[^\W\d_]*\d\w*|\w+")
_NUMBER = re.compile(r"[-+]?[\d,]*\d(?:\.\d+)?")


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= VALUE_TEXT_LIMIT else text[:VALUE_TEXT_LIMIT] + "..."


def _rows(table: Any) -> dict[str, Any]:
    """Key a table's rows: dict tables by key, list tables by each row's `id` (else index)."""
    if isinstance(table, dict):
        return {str(k): v for k, v in table.items()}
    if isinstance(table, list):
        return {
            str(row["id"]) if isinstance(row, dict) and "id" in row else f"#{i}": row for i, row in enumerate(table)
        }
    return {"": table}


def diff_states(got: dict[str, Any], want: dict[str, Any], limit: int = DIFF_LIMIT) -> tuple[list[dict], int]:
    """Every difference as {table, key, field, got, want}; `field` is "*" for a whole row
    that is missing or extra. Returns (first `limit` entries, total count)."""
    entries: list[dict[str, Any]] = []
    total = 0

    def add(table: str, key: str, field: str, g: Any, w: Any) -> None:
        nonlocal total
        total += 1
        if len(entries) < limit:
            entries.append({"table": table, "key": key, "field": field, "got": _short(g), "want": _short(w)})

    for table in sorted(set(got) | set(want)):
        got_rows, want_rows = _rows(got.get(table, {})), _rows(want.get(table, {}))
        for key in sorted(set(got_rows) | set(want_rows)):
            g, w = got_rows.get(key), want_rows.get(key)
            if g == w:
                continue
            if isinstance(g, dict) and isinstance(w, dict):
                for name in sorted(set(g) | set(w)):
                    if g.get(name) != w.get(name):
                        add(table, key, name, g.get(name), w.get(name))
            else:
                add(table, key, "*", g, w)
    return entries, total


def normalize(token: str) -> str:
    if _NUMBER.fullmatch(token):
        try:
            value = Decimal(token.replace(",", ""))
        except InvalidOperation:
            return token.lower()
        # Canonical text: 450.00 -> 450, -0 -> 0, 4.50 -> 4.5.
        value = value.normalize()
        if value == 0:
            return "0"
        text = format(value, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return token.lower()


def tokens(text: str) -> list[str]:
    return [normalize(t) for t in _TOKEN.findall(text)]


def is_candidate(token: str) -> bool:
    """Numbers and ids (anything holding a digit) are the values a message can guess."""
    return any(ch.isdigit() for ch in token)


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _scalars(value: Any, out: set[str], depth: int = 0) -> None:
    if depth > 8:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _scalars(k, out, depth + 1)
            _scalars(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _scalars(v, out, depth + 1)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float | str):
        out.update(t for t in tokens(str(value)) if is_candidate(t))


def grounded_values(events: list[Event]) -> set[str]:
    """Candidate values the trace itself showed: arguments and results of successful calls."""
    seen: set[str] = set()
    for event in events:
        if event.ok:
            _scalars(event.args, seen)
            _scalars(event.result, seen)
    return seen


def check_outputs(
    message: str,
    required: list[str],
    grounded: Callable[[], set[str]],
    max_unsupported: int,
    max_values: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Returns (failures, facts). A failure is {"output", "reason"}. `grounded` is called
    only when the message holds values beyond the required ones (it walks the trace)."""
    words = tokens(message)
    failures = [
        {"output": out, "reason": "not in the final message"} for out in required if not _contains(words, tokens(out))
    ]
    wanted = {t for out in required for t in tokens(out)}
    candidates = sorted({t for t in words if is_candidate(t)})
    extra = [t for t in candidates if t not in wanted]
    seen = grounded() if extra else set()
    unsupported = [t for t in extra if t not in seen]
    facts = {"message_values": len(candidates), "unsupported_values": [t[:40] for t in unsupported[:20]]}
    if required and len(unsupported) > max_unsupported:
        failures.append({
            "output": "*",
            "reason": f"the message lists {len(unsupported)} values found neither in the task's outputs nor in "
            f"the trace (at most {max_unsupported} allowed): looks like guessing",
        })
    if required and len(candidates) > max_values:
        failures.append({
            "output": "*",
            "reason": f"the message lists {len(candidates)} candidate values (at most {max_values} allowed)",
        })
    return failures, facts


def missing_reads(events: list[Event], required: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Required observations: each must match a successful call (same tool, same args)."""
    done = [(e.tool, e.args) for e in events if e.ok]
    return [r for r in required if (r["tool"], r.get("args", {})) not in done]
