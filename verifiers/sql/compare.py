"""Result comparison rules (standard library only).

Values are compared by kind: NULL only equals NULL; numbers compare by value (1 == 1.0)
and never equal text ('1' != 1) or booleans; a float tolerance applies only when at
least one side is a float, so exact integers and decimals stay exact; a single-precision
float (Postgres `real`) is compared at no finer than its own precision (`SINGLE_RELATIVE`). Results compare as
multisets (duplicates count) unless order matters, and then also position by position.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Row = tuple[Any, ...]

# Above this many leftover-row pairs, the tolerant matching pass is skipped (quadratic).
TOLERANT_PAIR_BUDGET = 4_000_000


@dataclass(frozen=True)
class Tagged:
    """A value of a type without a native Python analogue here (date, uuid, json...)."""

    type: str
    text: str


class Single(float):
    """A value the database computed in single precision (Postgres `real`/float4, about 7
    significant digits): its own rounding is larger than the default tolerance, so a float4
    sum that is right to its type's precision must not fail against an exact gold."""


# The relative tolerance a single-precision value is compared at, when the task's is narrower
# (float4 rounds each operation to 2^-24 relative; sums and averages of a few values stay within 1e-6).
SINGLE_RELATIVE = 1e-6


@dataclass(frozen=True)
class Tolerance:
    relative: float = 1e-9
    absolute: float = 1e-12


def is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def value_key(value: Any) -> tuple[Any, ...]:
    """A hashable, sortable key under which exactly-equal values coincide.

    Python already hashes 1, 1.0 and Decimal("1") alike, so numbers share one rank;
    booleans get their own rank because True == 1 in Python but not in SQL results.
    """
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if is_number(value):
        if isinstance(value, float) and math.isnan(value):
            return (3,)
        if isinstance(value, Decimal) and value.is_nan():
            return (3,)
        return (2, value)
    if isinstance(value, str):
        return (4, value)
    if isinstance(value, bytes | bytearray | memoryview):
        return (5, bytes(value))
    if isinstance(value, Tagged):
        return (6, value.type, value.text)
    return (7, type(value).__name__, repr(value))


def row_key(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value_key(v) for v in row)


def values_equal(a: Any, b: Any, tol: Tolerance) -> bool:
    if is_number(a) and is_number(b) and (isinstance(a, float) or isinstance(b, float)):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if math.isinf(fa) or math.isinf(fb):
            return fa == fb
        relative = tol.relative
        if relative > 0 and (isinstance(a, Single) or isinstance(b, Single)):
            relative = max(relative, SINGLE_RELATIVE)
        return math.isclose(fa, fb, rel_tol=relative, abs_tol=tol.absolute)
    return value_key(a) == value_key(b)


def rows_equal(a: Sequence[Any], b: Sequence[Any], tol: Tolerance) -> bool:
    return len(a) == len(b) and all(values_equal(x, y, tol) for x, y in zip(a, b, strict=True))


def _has_float(rows: Sequence[Sequence[Any]]) -> bool:
    return any(isinstance(v, float) for row in rows for v in row)


@dataclass
class Comparison:
    """How an actual result differs from the expected one (empty lists: it matches)."""

    match: bool
    missing: list[Row] = field(default_factory=list)
    extra: list[Row] = field(default_factory=list)
    order_mismatch_at: int | None = None
    column_problem: str | None = None


def _plain(rows: Sequence[Sequence[Any]]) -> bool:
    """Whether Python's own equality and hashing agree with `value_key` on these rows:
    true unless a boolean (True == 1) or a NaN (NaN != NaN) is present."""
    for row in rows:
        for v in row:
            if isinstance(v, bool) or (isinstance(v, float) and v != v):
                return False
            if isinstance(v, Decimal) and v.is_nan():
                return False
    return True


def multiset_difference(
    expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]], tol: Tolerance
) -> tuple[list[Row], list[Row]]:
    """Rows of `expected` not matched in `actual` and vice versa, duplicates counted."""
    key = tuple if _plain(expected) and _plain(actual) else row_key
    want = Counter(key(r) for r in expected)
    have = Counter(key(r) for r in actual)
    if want == have:
        return [], []
    short, surplus = want - have, have - want
    missing = _take(expected, short, key)
    extra = _take(actual, surplus, key)
    # Exact keys leave behind rows that differ only by float drift: pair them tolerantly.
    drift_possible = _has_float(missing) or _has_float(extra)
    if missing and extra and drift_possible and len(missing) * len(extra) <= TOLERANT_PAIR_BUDGET:
        missing, extra = _pair_tolerantly(missing, extra, tol)
    return missing, extra


def _take(rows: Sequence[Sequence[Any]], wanted: Counter[tuple[Any, ...]], key: Any) -> list[Row]:
    left = Counter(wanted)
    out: list[Row] = []
    for row in rows:
        k = key(row)
        if left[k] > 0:
            left[k] -= 1
            out.append(tuple(row))
    return out


def _pair_tolerantly(missing: list[Row], extra: list[Row], tol: Tolerance) -> tuple[list[Row], list[Row]]:
    unmatched = list(extra)
    still_missing: list[Row] = []
    for row in missing:
        for i, candidate in enumerate(unmatched):
            if rows_equal(row, candidate, tol):
                del unmatched[i]
                break
        else:
            still_missing.append(row)
    return still_missing, unmatched


def _plainly_identical(expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]]) -> bool:
    """Fast path: Python equality agrees with the rules when no booleans (True == 1)
    are involved; NaN only makes it say "different", which the full path then handles."""
    if len(expected) != len(actual):
        return False
    if any(isinstance(v, bool) for rows in (expected, actual) for row in rows for v in row):
        return False
    return all(tuple(a) == tuple(b) for a, b in zip(expected, actual, strict=True))


def compare_results(
    expected_columns: Sequence[str],
    expected_rows: Sequence[Sequence[Any]],
    actual_columns: Sequence[str],
    actual_rows: Sequence[Sequence[Any]],
    *,
    order_matters: bool,
    column_names_matter: bool,
    tol: Tolerance,
    tie_keys: Sequence[int] | None = None,
    tie_values: Sequence[Sequence[Any]] | None = None,
    boundary: Sequence[Sequence[Any]] | None = None,
) -> Comparison:
    """Compare a result with the expected one. With `order_matters`, rows must come in
    the expected order; the ORDER BY's keys, when known, relax that to the order between
    blocks of rows that tie on every key, since the order inside such a block is left to
    the database. The keys are given as result columns (`tie_keys`) or, for keys the
    result does not hold, as each expected row's key values (`tie_values`). `boundary`
    (with `tie_values`, under a LIMIT or OFFSET) holds every row of the whole ordered result
    that ties with the first or the last expected one, each followed by its key values: the
    first and last tie blocks may be filled by any rows of their own key."""
    if len(expected_columns) != len(actual_columns):
        return Comparison(
            False, column_problem=f"expected {len(expected_columns)} columns, got {len(actual_columns)}"
        )
    if column_names_matter:
        want = [c.casefold() for c in expected_columns]
        have = [c.casefold() for c in actual_columns]
        if want != have:
            return Comparison(False, column_problem=f"column names differ: got {list(actual_columns)}")
    if _plainly_identical(expected_rows, actual_rows):
        return Comparison(True)  # same rows in the same order: equal under every rule
    if order_matters and tie_values is not None and boundary is not None and \
            _fills_boundary(expected_rows, actual_rows, tie_values, boundary, tol):
        return Comparison(True)
    missing, extra = multiset_difference(expected_rows, actual_rows, tol)
    if missing or extra:
        return Comparison(False, missing=missing, extra=extra)
    if tie_values is None and tie_keys is not None:
        tie_values = [[row[k] for k in tie_keys] for row in expected_rows]
    if order_matters and tie_values is None:
        for i, (want_row, have_row) in enumerate(zip(expected_rows, actual_rows, strict=True)):
            if not rows_equal(want_row, have_row, tol):
                return Comparison(False, order_mismatch_at=i)
    elif order_matters:
        assert tie_values is not None and len(tie_values) == len(expected_rows)
        for start, end in _tie_blocks(tie_values):
            if start + 1 == end:
                same = rows_equal(expected_rows[start], actual_rows[start], tol)
            else:
                same = multiset_difference(expected_rows[start:end], actual_rows[start:end], tol) == ([], [])
            if not same:
                return Comparison(False, order_mismatch_at=start)
    return Comparison(True)


def _fills_boundary(expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]],
                    keys: Sequence[Sequence[Any]], boundary: Sequence[Sequence[Any]], tol: Tolerance) -> bool:
    """Every tie block between the first and the last matches; the first and the last (cut by
    the gold's OFFSET and LIMIT) are filled from the boundary rows of their own key."""
    if len(expected) != len(actual) or not expected:
        return False
    width = len(expected[0])
    blocks = _tie_blocks(keys)
    for number, (start, end) in enumerate(blocks):
        if 0 < number < len(blocks) - 1:
            if multiset_difference(expected[start:end], actual[start:end], tol) != ([], []):
                return False
            continue
        key = row_key(keys[start])
        pool = [row[:width] for row in boundary if row_key(row[width:]) == key]
        if multiset_difference(pool, actual[start:end], tol)[1]:
            return False
    return True


def _tie_blocks(keys: Sequence[Sequence[Any]]) -> list[tuple[int, int]]:
    """[start, end) runs of consecutive rows whose key values are all equal."""
    blocks: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or row_key(keys[i]) != row_key(keys[start]):
            blocks.append((start, i))
            start = i
    return blocks


def show_value(value: Any) -> Any:
    """A JSON-ready rendering of a result value for evidence."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytes_hex": bytes(value)[:64].hex()}
    if isinstance(value, Tagged):
        return {value.type: value.text}
    return repr(value)
