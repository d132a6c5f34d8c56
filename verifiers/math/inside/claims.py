"""In-sandbox check of the claims in a math working (see verifiers.math.detectors).

Each chain `a = b = c` gives the claims `a = b` and `b = c`. A claim is false only when
it is false under every reading: both sides are numbers and neither direction of the
answer comparison accepts them (a rounded decimal such as `1/3 = 0.333` is accepted), or
the sides differ by a nonzero constant (false as an identity and as an equation). Sides
that do not parse, or that involve unknowns in any other way, are not checked.
"""

from __future__ import annotations

import functools
from typing import Any

import sympy as sp

from verifiers.math.inside.answer import Parsed, ParseFailure, parse_answer
from verifiers.math.inside.compare import equivalent
from verifiers.math.inside.parse import MAX_EXPANSION, expansion_size

MAX_CHAINS = 20


@functools.lru_cache(maxsize=1024)
def _parse(side: str) -> Parsed | None:
    # A group's responses often share steps; parsed values are only read, never changed.
    try:
        parsed = parse_answer(side)
    except (ParseFailure, RecursionError, MemoryError, OverflowError, ValueError, TypeError):
        return None
    return parsed if parsed.kind == "expr" and isinstance(parsed.value, sp.Expr) else None


def _is_false(left: Parsed, right: Parsed) -> bool | None:
    """True: false claim; False: holds; None: not checkable."""
    a, b = left.value, right.value
    assert isinstance(a, sp.Expr) and isinstance(b, sp.Expr)
    if a.free_symbols or b.free_symbols:
        if expansion_size(a - b) > MAX_EXPANSION:
            return None
        difference = sp.expand(a - b)
        if difference.free_symbols or not difference.is_number:
            return None
        return bool(difference != 0)
    if a.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or b.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return None
    return not (equivalent(left, right)[0] or equivalent(right, left)[0])


def check_claims(chains: Any) -> dict[str, Any]:
    checked, false = 0, []
    for chain in (chains if isinstance(chains, list) else [])[:MAX_CHAINS]:
        if not isinstance(chain, list):
            continue
        parsed = [_parse(side) if isinstance(side, str) else None for side in chain]
        for i in range(len(chain) - 1):
            left, right = parsed[i], parsed[i + 1]
            if left is None or right is None:
                continue
            try:
                verdict = _is_false(left, right)
            except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, ZeroDivisionError):
                verdict = None
            if verdict is None:
                continue
            checked += 1
            if verdict:
                false.append({"claim": f"{chain[i]} = {chain[i + 1]}"[:300]})
    return {"checked": checked, "false": false}
