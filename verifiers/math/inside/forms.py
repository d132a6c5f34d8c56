"""Required forms (task field `form`): an equal value must also be written in the form the task
asks for. Checked on each final answer as written (after normalisation), only once its value
is equal. Pure string work plus sympy's `isprime` on small integers."""

from __future__ import annotations

import math
import re

import sympy as sp

from verifiers.math.inside.normalise import normalise

FORMS = ("lowest_terms", "prime_factorization", "scientific", "integer")
_INT = r"[+-]?\s*\d+"
_FRACTION = re.compile(rf"([+-]?)\s*(?:\\frac\s*\{{\s*({_INT})\s*\}}\s*\{{\s*({_INT})\s*\}}|\\frac\s*(\d)(\d)"
                       rf"|\(?\s*({_INT})\s*\)?\s*/\s*\(?\s*({_INT})\s*\)?)")
_INTEGER = re.compile(r"[+-]?\s*\d+")
_FACTOR = re.compile(r"\(?\s*(\d+)\s*\)?(?:\s*\^\s*\{?\s*(\d+)\s*\}?)?")
_SCIENTIFIC = re.compile(r"[+-]?\s*([1-9])(?:\.(\d+))?\s*(?:\*\s*10\s*\^\s*\{?\s*[+-]?\s*\d+\s*\}?|[eE][+-]?\d+)")
MAX_PRIME_CHECK = 10**12


def _value_text(candidate: str) -> str:
    text = normalise(candidate).text
    return text.rsplit("=", 1)[-1].strip()  # "x = 3/4": the value


def _lowest_terms(text: str) -> bool:
    if _INTEGER.fullmatch(text):
        return True
    m = _FRACTION.fullmatch(text)
    if m is None:
        return False
    numerator, denominator = [int(g.replace(" ", "")) for g in m.groups()[1:] if g is not None]
    return denominator not in (0, 1, -1) and math.gcd(numerator, denominator) == 1


def _prime_factorization(text: str) -> bool:
    factors = [f.strip() for f in text.split("*")]
    for factor in factors:
        m = _FACTOR.fullmatch(factor)
        if m is None or int(m.group(2) or 1) < 1:
            return False
        base = int(m.group(1))
        if base > MAX_PRIME_CHECK or not sp.isprime(base):
            return False
    return True


def _scientific(text: str, figures: int | None) -> bool:
    m = _SCIENTIFIC.fullmatch(text)
    if m is None:
        return False
    return figures is None or 1 + len(m.group(2) or "") == figures


def form_problem(candidate: str, form: str, figures: int | None = None) -> str | None:
    """Why `candidate` is not in the required form, or None when it is."""
    text = _value_text(candidate)
    ok = {"lowest_terms": _lowest_terms, "prime_factorization": _prime_factorization,
          "integer": lambda t: _INTEGER.fullmatch(t) is not None,
          "scientific": lambda t: _scientific(t, figures)}[form](text)
    if ok:
        return None
    if form == "scientific" and figures:
        return f"not written in scientific notation with {figures} significant figures"
    return f"not written as {form.replace('_', ' ')}"
