"""Row-multiset helpers shared by the SQLite runner (inside the sandbox) and the Postgres
backend (trusted side). Standard library only."""

from __future__ import annotations

from collections import Counter
from typing import Any


def hashable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # NaN != NaN would make an untouched row look changed.
    return tuple("\0nan" if isinstance(v, float) and v != v else v for v in row)


def pick(rows: list[tuple[Any, ...]], wanted: Counter) -> list[tuple[Any, ...]]:
    """The rows of `rows` that `wanted` counts, each as often as counted."""
    left = Counter(wanted)
    out = []
    for row in rows:
        key = hashable(row)
        if left[key] > 0:
            left[key] -= 1
            out.append(row)
    return out
