"""Angles: a value written in degrees (`30^\\circ`, `30°`, `30 degrees`) against one in radians
(a multiple of pi with no unit, `\\frac{\\pi}{6}`) names the same angle when the degrees times
pi/180 equal it. Only then: `30` without a degree sign stays the number 30, and two values in
degrees (or two without) compare as they are."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import sympy as sp

if TYPE_CHECKING:
    from verifiers.math.inside.answer import Parsed

DEGREE_WORDS = frozenset({"degree", "degrees", "deg"})


def in_radians(answer: Parsed, gold: Parsed) -> tuple[Parsed, Parsed] | None:
    """(answer, gold) with the side in degrees converted to radians, when exactly one side is in
    degrees and the other is a unitless multiple of pi; else None."""
    if answer.degrees == gold.degrees:
        return None
    degrees, other = (answer, gold) if answer.degrees else (gold, answer)
    value = other.value
    if other.unit or other.percent or not isinstance(value, sp.Expr) or not value.has(sp.pi):
        return None
    if not isinstance(degrees.value, sp.Expr) or degrees.value.free_symbols:
        return None
    radians = replace(degrees, value=degrees.value * sp.pi / 180, degrees=False, unit="")
    return (radians, other) if degrees is answer else (other, radians)
