"""Pure checks on a replayed trace: the state diff, required reads, required outputs.

Required outputs are matched as *values*: the message is split into tokens and an output
must appear as a whole token sequence ("450" is not found in "4500" or "1,450"). Numbers
are compared by value ("450.00" is 450). To stop a message from listing candidates until
one hits, the message may hold only a few candidate values (numbers and ids) that are
neither required nor seen in a successful call of the trace.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from verifiers.tool_state.inside.env import Event

DIFF_LIMIT = 50
VALUE_TEXT_LIMIT = 200
# A date or a time is one value ("2026-12-03" was three: 2026, -12, -3; round 16), and a sign
# only opens a number when no word or number stands right before it ("10-20" is 10 and 20).
_SIGN = r"(?:(?<![\w.])[-+])?"
_TOKEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?(?![\d:])|\d{1,2}:\d{2}(?::\d{2})?(?![\d:])"
                    rf"|{_SIGN}\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?(?!\d|,\d)|{_SIGN}\d+(?:\.\d+)?|[^\W\d_]*\d\w*|\w+")
# Words between two values that offer them as alternatives: "either 800 or 100", "100 or maybe 50".
_HEDGE_FILLERS = frozenset({"maybe", "possibly", "perhaps", "probably"})
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


def _content(row: Any) -> str:
    """A log row's content without the id the environment numbered it with."""
    body = {k: v for k, v in row.items() if k != "id"} if isinstance(row, dict) else row
    return json.dumps(body, sort_keys=True, default=repr)


def _unmatched_log_rows(got: list[Any], want: list[Any]) -> tuple[list[Any], list[Any]]:
    """The rows of two list tables left once rows equal apart from their id are paired off.

    A list table is a log the environment appends to in call order and numbers as it goes
    (transfers T1, T2, ...). Calls that commute, such as two independent transfers, leave the
    same entries under each other's numbers; the task names no order, so the log is a multiset
    of entries, not a sequence (round 9). Order that matters still shows: a call that fails in
    the wrong order leaves no entry, or a different one.
    """
    left = Counter(_content(row) for row in want)
    got_rest = []
    for row in got:
        key = _content(row)
        if left[key] > 0:
            left[key] -= 1
        else:
            got_rest.append(row)
    want_rest = []
    for row in want:
        key = _content(row)
        if left[key] > 0:  # paired with none of got's rows
            left[key] -= 1
            want_rest.append(row)
    return got_rest, want_rest


def diff_states(got: dict[str, Any], want: dict[str, Any], limit: int = DIFF_LIMIT) -> tuple[list[dict], int]:
    """Every difference as {table, key, field, got, want}; `field` is "*" for a whole row
    that is missing or extra. Returns (first `limit` entries, total count). List tables
    (logs) are compared as multisets of entries (`_unmatched_log_rows`); what is left of
    them is keyed by id as dict tables are."""
    entries: list[dict[str, Any]] = []
    total = 0

    def add(table: str, key: str, field: str, g: Any, w: Any) -> None:
        nonlocal total
        total += 1
        if len(entries) < limit:
            entries.append({"table": table, "key": key, "field": field, "got": _short(g), "want": _short(w)})

    for table in sorted(set(got) | set(want)):
        got_table, want_table = got.get(table, {}), want.get(table, {})
        if isinstance(got_table, list) and isinstance(want_table, list):
            got_table, want_table = _unmatched_log_rows(got_table, want_table)
        got_rows, want_rows = _rows(got_table), _rows(want_table)
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
    hedged = _hedged_pairs(words, wanted)
    if required and hedged:
        first, second = hedged[0]
        failures.append({"output": "*",
                         "reason": f"the message offers {first[:40]} or {second[:40]} as the value: a hedge"})
    if required and len(candidates) > max_values:
        failures.append({
            "output": "*",
            "reason": f"the message lists {len(candidates)} candidate values (at most {max_values} allowed)",
        })
    return failures, facts


def _hedged_pairs(words: list[str], wanted: set[str]) -> list[tuple[str, str]]:
    """Two different values joined by "or" (a filler word such as "maybe" may follow it), one
    of them a required output's: the message offers the answer and an alternative to it
    ("K2 holds either 800 or 100" read both balances and named both; round 16)."""
    pairs = []
    for i, word in enumerate(words):
        if word != "or" or i == 0:
            continue
        j = i + 1 + (i + 1 < len(words) and words[i + 1] in _HEDGE_FILLERS)
        if j >= len(words):
            continue
        before, after = words[i - 1], words[j]
        if is_candidate(before) and is_candidate(after) and before != after and (before in wanted or after in wanted):
            pairs.append((before, after))
    return pairs


def missing_reads(events: list[Event], required: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Required observations: each must match a successful call (same tool, same args)."""
    done = [(e.tool, e.args) for e in events if e.ok]
    return [r for r in required if (r["tool"], r.get("args", {})) not in done]
