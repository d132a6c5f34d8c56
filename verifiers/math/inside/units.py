"""Quantities: a value with a physical unit on both sides compares as a quantity, with sympy's
units (`sympy.physics.units`, part of sympy: no new dependency). `150 cm` equals `1.5 m`;
`1.5 cm` does not; `4 N` is not `4 J` (different dimensions). A unit we do not know as a
physical one (`apples`, `dollars`) leaves today's rule: units stripped, or compared as words
with `require_units`. Imported lazily (about 1 s): the warm worker loads it before it forks."""

from __future__ import annotations

import functools
import re

import sympy as sp

# Unit words as `normalise.strip_units` spells them (lower case) -> sympy unit attribute names.
_NAMES = {
    "m": "meter", "meter": "meter", "meters": "meter", "metre": "meter", "metres": "meter", "cm": "centimeter",
    "centimeter": "centimeter", "centimeters": "centimeter", "mm": "millimeter", "millimeter": "millimeter",
    "millimeters": "millimeter", "km": "kilometer", "kilometer": "kilometer", "kilometers": "kilometer",
    "nm": "nanometer", "in": "inch", "inch": "inch", "inches": "inch", "ft": "foot", "foot": "foot", "feet": "foot",
    "yd": "yard", "yard": "yard", "yards": "yard", "mi": "mile", "mile": "mile", "miles": "mile",
    "s": "second", "sec": "second", "second": "second", "seconds": "second", "min": "minute", "mins": "minute",
    "minute": "minute", "minutes": "minute", "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour",
    "hours": "hour", "day": "day", "days": "day", "week": "week", "weeks": "week",
    "g": "gram", "gram": "gram", "grams": "gram", "kg": "kilogram", "kilogram": "kilogram",
    "kilograms": "kilogram", "mg": "milligram", "l": "liter", "liter": "liter", "liters": "liter",
    "litre": "liter", "litres": "liter", "ml": "milliliter", "j": "joule", "joule": "joule", "joules": "joule",
    "n": "newton", "newton": "newton", "newtons": "newton", "w": "watt", "watt": "watt", "watts": "watt",
    "v": "volt", "volt": "volt", "volts": "volt", "hz": "hertz", "pa": "pascal", "k": "kelvin", "kelvin": "kelvin",
    "ev": "electronvolt", "米": "meter", "厘米": "centimeter", "毫米": "millimeter", "千米": "kilometer",
    "公里": "kilometer", "克": "gram", "千克": "kilogram", "公斤": "kilogram", "秒": "second", "分钟": "minute",
    "小时": "hour", "天": "day", "升": "liter", "毫升": "milliliter",
}
_COMPOUND = {"mph": "mi/h", "kmh": "km/h", "kph": "km/h"}
_FACTOR = re.compile(r"([^\s*^/]+)(?:\^(-?\d))?")


def _unit_word(word: str) -> sp.Expr | None:
    from sympy.physics import units

    name = _NAMES.get(word)
    return getattr(units, name) if name else None


@functools.lru_cache(maxsize=256)
def unit_of(text: str) -> sp.Expr | None:
    """A unit as a sympy expression (`m/s^2`, `km/h`, `cm^2`, `square meters`), or None when
    any word of it is not a physical unit we know."""
    text = _COMPOUND.get(text, text)
    text = re.sub(r"\b(?:square|sq)\s+(\w+)", r"\1^2", text)
    text = re.sub(r"\bcubic\s+(\w+)", r"\1^3", text)
    numerator, _, denominator = text.partition("/")
    expr: sp.Expr = sp.Integer(1)
    for part, sign in ((numerator, 1), (denominator, -1)):
        for word, power in _FACTOR.findall(part):
            unit = _unit_word(word)
            if unit is None:
                return None
            expr = expr * unit ** (sign * int(power or 1))
    return None if expr == 1 else expr


# Temperature scales convert with an offset, which sympy's units do not model: value -> kelvin.
_KELVIN = {"k": (sp.Integer(1), sp.Integer(0)), "kelvin": (sp.Integer(1), sp.Integer(0)),
           "celsius": (sp.Integer(1), sp.Rational(27315, 100)),
           "fahrenheit": (sp.Rational(5, 9), sp.Rational(5, 9) * sp.Rational(-32) + sp.Rational(27315, 100))}


def in_kelvin(value: sp.Expr, unit: str) -> sp.Expr | None:
    """A temperature in kelvin, or None when `unit` is not a temperature scale."""
    scale = _KELVIN.get(unit)
    return None if scale is None else value * scale[0] + scale[1]


def factor(answer_unit: str, gold_unit: str) -> sp.Expr | None | bool:
    """How many gold units one answer unit is; False when the dimensions differ; None when
    either side is not a physical unit."""
    from sympy.physics import units

    a, g = unit_of(answer_unit), unit_of(gold_unit)
    if a is None or g is None:
        return None
    ratio = sp.nsimplify(units.convert_to(a, g) / g)
    if ratio.free_symbols or ratio.has(units.Quantity):
        return False
    return ratio
