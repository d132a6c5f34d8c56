"""Equivalence of parsed answers. Exact when both sides are exact; a tolerance only when a
side was written as a decimal. Runs inside the sandbox (sympy can be slow)."""

from __future__ import annotations

import random

import sympy as sp

from verifiers.math.parse import Parsed

# Exact comparison falls back to 60-digit numerics for identities simplify misses; the
# threshold is relative, so 1/2^99 and 1/2^98 stay different.
EXACT_REL = sp.Rational(1, 10**45)
ANSWER_DECIMAL_REL = 1e-6


def equivalent(answer: Parsed, gold: Parsed) -> tuple[bool, str]:
    """Return (equal, how)."""
    if answer.kind == "multi" and len(answer.items) == 1:
        answer = answer.items[0]
    if gold.kind == "multi" and len(gold.items) == 1:
        gold = gold.items[0]
    if answer.kind == "expr" and gold.kind == "expr":
        return _expr_equal(answer, gold)
    if answer.kind == "text" or gold.kind == "text":
        if answer.kind == gold.kind:
            return answer.value == gold.value, "text"
        return False, "kind_mismatch"
    if answer.kind == "tuple" and gold.kind == "tuple":
        return _ordered(answer.items, gold.items, "tuple")
    if answer.kind == "interval" and gold.kind == "interval":
        if (answer.left_open, answer.right_open) != (gold.left_open, gold.right_open):
            return False, "interval_bounds_differ"
        return _ordered(answer.items, gold.items, "interval")
    if {answer.kind, gold.kind} == {"tuple", "interval"}:
        # "(2, 5)" is both a pair and an open interval; only an open interval can match it.
        interval = answer if answer.kind == "interval" else gold
        pair = gold if interval is answer else answer
        if interval.left_open and interval.right_open and len(pair.items) == 2:
            return _ordered(answer.items, gold.items, "open_interval_as_pair")
        return False, "interval_bounds_differ"
    unordered = {"set", "multi", "union"}
    if answer.kind in unordered and gold.kind in unordered:
        if "union" in (answer.kind, gold.kind) and answer.kind != gold.kind:
            return False, "kind_mismatch"
        return _unordered(answer.items, gold.items, answer.kind)
    return False, "kind_mismatch"


def _ordered(a: list[Parsed], b: list[Parsed], how: str) -> tuple[bool, str]:
    if len(a) != len(b):
        return False, f"{how}_length_differs"
    for x, y in zip(a, b, strict=True):
        if not equivalent(x, y)[0]:
            return False, f"{how}_element_differs"
    return True, how


def _unordered(a: list[Parsed], b: list[Parsed], how: str) -> tuple[bool, str]:
    if len(a) != len(b):
        return False, f"{how}_size_differs"
    remaining = list(b)
    for x in a:
        for i, y in enumerate(remaining):
            if equivalent(x, y)[0]:
                del remaining[i]
                break
        else:
            return False, f"{how}_element_missing"
    return True, f"{how}_unordered"


def _expr_equal(answer: Parsed, gold: Parsed) -> tuple[bool, str]:
    a, b = answer.value, gold.value
    assert isinstance(a, sp.Basic) and isinstance(b, sp.Basic)
    if a == b:
        return True, "structural"
    if a.free_symbols or b.free_symbols:
        return _symbolic_equal(a, b)
    if answer.decimals is None and gold.decimals is None:
        return _exact_equal(a, b)
    return _tolerant_equal(a, b, answer.decimals, gold.decimals)


def _exact_equal(a: sp.Expr, b: sp.Expr) -> tuple[bool, str]:
    if a.has(sp.oo, -sp.oo, sp.zoo) or b.has(sp.oo, -sp.oo, sp.zoo):
        return bool(a == b), "infinity"
    diff = sp.simplify(a - b)
    if diff == 0:
        return True, "exact_simplify"
    try:
        na, nb = sp.N(a, 60), sp.N(b, 60)
        scale = max(abs(na), abs(nb))
        if scale == 0:
            return True, "exact_numeric"
        if abs(na - nb) <= EXACT_REL * scale:
            return True, "exact_numeric"
    except (TypeError, ValueError):
        pass
    return False, "exact"


def _tolerant_equal(a: sp.Expr, b: sp.Expr, answer_places: int | None, gold_places: int | None) -> tuple[bool, str]:
    try:
        na, nb = complex(sp.N(a, 30)), complex(sp.N(b, 30))
    except (TypeError, ValueError):
        return False, "not_numeric"
    diff = abs(na - nb)
    scale = max(abs(nb), 1e-300)
    if gold_places is not None:
        # The gold's author chose its precision: the answer must round to it.
        if diff <= 0.5 * 10.0 ** (-gold_places) + 1e-9 * scale:
            return True, f"decimal_tolerance_{gold_places}_places"
        return False, "decimal_tolerance"
    if diff <= ANSWER_DECIMAL_REL * scale:
        return True, "decimal_relative"
    if answer_places is not None and answer_places >= 3 and diff <= 0.5 * 10.0 ** (-answer_places):
        return True, f"answer_rounded_{answer_places}_places"
    return False, "decimal_tolerance"


def _symbolic_equal(a: sp.Expr, b: sp.Expr) -> tuple[bool, str]:
    if isinstance(a, sp.Expr) and isinstance(b, sp.Expr):
        if sp.expand(a - b) == 0:
            return True, "symbolic_expand"
        if sp.simplify(a - b) == 0:
            return True, "symbolic_simplify"
        symbols = sorted(a.free_symbols | b.free_symbols, key=lambda s: s.name)
        if not symbols or a.free_symbols != b.free_symbols:
            return False, "symbolic"
        # Deterministic random points as a last resort for identities simplify misses.
        rng = random.Random(1234)
        for _ in range(6):
            point = {s: sp.Rational(rng.randint(1, 97), rng.randint(1, 13)) for s in symbols}
            try:
                va, vb = complex(sp.N(a.subs(point), 30)), complex(sp.N(b.subs(point), 30))
            except (TypeError, ValueError, ZeroDivisionError):
                return False, "symbolic"
            if abs(va - vb) > 1e-12 * max(1.0, abs(vb)):
                return False, "symbolic_sampling"
        return True, "symbolic_sampling"
    return False, "symbolic"
