"""Output comparison for stdin/stdout cases, run on the trusted host.

Every mode compares the whole output: a prefix of the expected output never passes
(open-r1's `zip()` comparison let one through), and extra output fails too.
"""

from __future__ import annotations

import math
from typing import Literal

CompareMode = Literal["exact", "lines", "whitespace", "float"]


def _is_number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _close(got: float, want: float, tol: float) -> bool:
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return got == want
    return abs(got - want) <= tol * max(1.0, abs(want))


def outputs_match(got: str, want: str, mode: CompareMode, tol: float = 1e-6) -> bool:
    """exact: byte for byte. lines: per line, ignoring trailing spaces and trailing blank
    lines. whitespace: token sequences equal. float: token sequences equal, where a token
    that is a number on both sides matches within `tol` (absolute below 1, else relative)."""
    if mode == "exact":
        return got == want
    if mode == "lines":
        return [line.rstrip() for line in got.rstrip().splitlines()] == [
            line.rstrip() for line in want.rstrip().splitlines()
        ]
    got_tokens, want_tokens = got.split(), want.split()
    if len(got_tokens) != len(want_tokens):
        return False
    if mode == "whitespace":
        return got_tokens == want_tokens
    for g, w in zip(got_tokens, want_tokens, strict=True):
        if g == w:
            continue
        gv, wv = _is_number(g), _is_number(w)
        if gv is None or wv is None or not _close(gv, wv, tol):
            return False
    return True


def first_difference(got: str, want: str) -> int:
    """1-based line of the first difference (for evidence that reveals no expected text)."""
    got_lines, want_lines = got.splitlines(), want.splitlines()
    for index, (g, w) in enumerate(zip(got_lines, want_lines, strict=False), start=1):
        if g.rstrip() != w.rstrip():
            return index
    return min(len(got_lines), len(want_lines)) + 1
