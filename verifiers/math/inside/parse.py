"""Safe expression parser: LaTeX or plain text -> sympy objects, without `eval`.

sympy's own `parse_expr`/`sympify` call `eval` on the input; this module never does. It
is a small recursive-descent parser that builds sympy objects directly, and it refuses
values too large to compute (huge powers, factorials, binomials) before sympy tries. It
still runs inside the sandbox, under time and memory limits, as defence in depth.
Structures (sets, intervals, relations, lists) are recognised in `answer.py`.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import sympy as sp

from verifiers.math.inside.normalise import ParseFailure, TooLarge

MAX_RESULT_BITS = 1 << 16
MAX_FACTORIAL = 2000
MAX_DEPTH = 60
MAX_MATRIX_CELLS = 400
# Powers of unknowns: largest exponent, and for a sum, the largest exponent and expanded terms.
MAX_SYMBOLIC_EXPONENT = 1000
MAX_EXPANDED_EXPONENT = 200
MAX_EXPANDED_TERMS = 500
# Terms an expansion may make when comparing (see expansion_size).
MAX_EXPANSION = 20_000

__all__ = ["ParseFailure", "TooLarge", "based_numeral_value", "parse_expression"]

# A numeral written in a base ("1011_2") is kept as a symbol named "1011_base2", so that it is
# never silently read as the decimal 1011; `based_numeral_value` gives its value.
_BASED_NUMERAL = re.compile(r"(\d+)_base(\d+)")


def based_numeral_value(value: object) -> int | None:
    """The integer a based numeral stands for (`1011_2` -> 11); None for anything else or bad digits."""
    if not isinstance(value, sp.Symbol):
        return None
    m = _BASED_NUMERAL.fullmatch(value.name)
    if m is None:
        return None
    try:
        return int(m.group(1), int(m.group(2)))
    except ValueError:  # a digit the base does not have ("1021_2")
        return None


# ----------------------------------------------------------------------------- lexing

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+(?![a-zA-Z]))?)"
    r"|(?P<cmd>\\[a-zA-Z]+|\\\{|\\\}|\\\||\\\\)|(?P<name>[a-zA-Z]+)"
    r"|(?P<op>\*\*|<=|>=|!=|[-+*/^!(),\[\]{}=|<>_:&']))"
)

_FUNCS = {
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "cot": sp.cot, "sec": sp.sec, "csc": sp.csc,
    "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "asin": sp.asin, "acos": sp.acos,
    "atan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "exp": sp.exp,
    "ln": sp.log, "log": sp.log, "sqrt": sp.sqrt, "abs": sp.Abs,
}
_CONSTANTS = {"pi": sp.pi, "oo": sp.oo, "infty": sp.oo, "inf": sp.oo, "infinity": sp.oo}
_GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
    "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
    "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega",
}


def tokenize(s: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    s = s.rstrip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise ParseFailure(f"unexpected character {s[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        # "1.234.567" is one numeral with two points (a locale's thousands, or a typo), never the
        # product 1.234 * .567.
        if kind == "num" and "." in m.group(kind) and s[pos:pos + 1] == "." and s[pos + 1:pos + 2].isdigit():
            raise ParseFailure(f"a number with two decimal points: {s[m.start(kind):pos + 2]!r}")
        tokens.append((kind, m.group(kind)))
    return tokens


# ---------------------------------------------------------------------------- parsing


def _guarded_pow(base: sp.Basic, exp: sp.Expr) -> sp.Basic:
    if isinstance(base, sp.MatrixBase):
        if not (exp.is_Integer and 0 <= int(exp) <= 64 and base.is_square):
            raise ParseFailure("a matrix power needs a small whole exponent")
        return base ** int(exp)
    if base.is_number and exp.is_number and exp.is_real:
        try:
            magnitude = abs(sp.N(base, 15))
            exponent = abs(sp.N(exp, 15))
        except (TypeError, ValueError):  # pragma: no cover - sympy oddities
            raise ParseFailure("cannot evaluate power") from None
        if magnitude not in (0, 1) and exponent > 64:
            bits = float(exponent) * abs(float(sp.log(magnitude, 2))) if magnitude != sp.oo else float("inf")
            if bits > MAX_RESULT_BITS:
                raise TooLarge("power too large to evaluate safely")
    return _guarded_symbolic(sp.Pow(base, exp))


def _guarded_symbolic(power: sp.Basic) -> sp.Basic:
    """A power of an unknown that comparing would have to expand or evaluate at huge size
    (`(1+x)^{1000000}`, `((x+1)^{50})^{50}`, `\\sin(x^{100000})`) is refused at once, not left
    to the time limit."""
    if not isinstance(power, sp.Pow) or not power.base.free_symbols or not power.exp.is_number:
        return power
    try:
        exponent = abs(float(power.exp))
    except (TypeError, ValueError):
        return power
    if exponent > MAX_SYMBOLIC_EXPONENT:
        raise TooLarge("power of an unknown too large to compare safely")
    terms = len(power.base.args) if isinstance(power.base, sp.Add) else 1
    if terms > 1 and (exponent > MAX_EXPANDED_EXPONENT
                      or math.comb(int(exponent) + terms - 1, terms - 1) > MAX_EXPANDED_TERMS):
        raise TooLarge("power of a sum too large to expand safely")
    return power


def expansion_size(expr: sp.Basic) -> int:
    """An upper estimate of the terms `sp.expand(expr)` makes, without expanding: products of
    allowed powers (`(x+y+z)^{30}(a+b+c)^{30}`) would still take seconds; those are compared
    by sampling instead."""
    if isinstance(expr, sp.Add):
        return sum(expansion_size(arg) for arg in expr.args)
    if isinstance(expr, sp.Mul):
        size = 1
        for arg in expr.args:
            size *= expansion_size(arg)
            if size > MAX_EXPANSION:
                return size
        return size
    if isinstance(expr, sp.Pow) and isinstance(expr.base, sp.Add) and expr.exp.is_Integer and expr.exp > 0:
        terms = expansion_size(expr.base)
        return math.comb(int(expr.exp) + terms - 1, terms - 1) if terms <= MAX_EXPANSION else terms
    return 1


def _guarded_factorial(value: sp.Expr) -> sp.Expr:
    if value.is_number and (not value.is_real or abs(sp.N(value)) > MAX_FACTORIAL):
        raise TooLarge("factorial too large to evaluate safely")
    return sp.factorial(value)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.decimals: int | None = None
        # The tightest decimal literal: its half-unit in the last place relative to its value
        # (0 for a written zero: no window around zero), and its significant figures.
        self.relative: float | None = None
        self.figures: int | None = None
        self.depth = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ParseFailure("unexpected end of answer")
        self.pos += 1
        return tok

    def accept(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[1] == value:
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.accept(value):
            got = self.peek()
            raise ParseFailure(f"expected {value!r}, found {got[1] if got else 'end'!r}")

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    # expr := term (('+'|'-') term)*
    def expr(self) -> sp.Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseFailure("answer nested too deeply")
        value = self.term()
        while True:
            if self.accept("+"):
                value = value + self.term()
            elif self.accept("-"):
                value = value - self.term()
            elif self.peek() and self.peek()[1] == "\\pm":
                raise ParseFailure("± answers must be written as two answers")
            else:
                break
        self.depth -= 1
        return value

    def _starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        kind, value = tok
        if kind in ("num", "name"):
            return True
        if kind == "cmd":
            return value not in ("\\}", "\\cup", "\\cap", "\\pm", "\\mp", "\\to", "\\|", "\\\\", "\\in")
        return value in ("(", "{", "[")

    # term := unary (('*'|'/'|implicit) unary)*
    def term(self) -> sp.Expr:
        value = self.unary()
        while True:
            if self.accept("*"):
                value = value * self.unary()
            elif self.accept("/"):
                denominator = self.unary()
                value = _divide(value, denominator)
            elif self._starts_atom():
                value = value * self.power()
            else:
                return value

    def unary(self) -> sp.Expr:
        if self.accept("-"):
            return -self.unary()
        if self.accept("+"):
            return self.unary()
        return self.power()

    def power(self) -> sp.Expr:
        base = self.postfix()
        if self.accept("^") or self.accept("**"):
            exponent = self.group_or_unary()
            return _guarded_pow(base, exponent)
        return base

    def group_or_unary(self) -> sp.Expr:
        if self.accept("{"):
            value = self.expr()
            self.expect("}")
            return value
        if self.peek() and self.peek()[0] == "num":
            # LaTeX: x^23 means x^2 * 3 only in sloppy writing; take one digit like LaTeX does
            kind, text = self.take()
            if "." not in text and len(text) > 1:
                self.tokens.insert(self.pos, ("num", text[1:]))
                text = text[0]
            return self.number(text)
        return self.unary()

    def postfix(self) -> sp.Expr:
        value = self.atom()
        while self.accept("!"):
            value = _guarded_factorial(value)
        return value

    def number(self, text: str) -> sp.Expr:
        mantissa, _, exponent = text.lower().partition("e")
        places = len(mantissa.split(".", 1)[1]) if "." in mantissa else None
        value = sp.Rational(mantissa.rstrip(".") or "0")
        if places is not None or exponent:
            self._precision(mantissa, places or 0, value)
        if exponent:
            shift = int(exponent)
            if abs(shift) > 400:
                raise TooLarge("exponent too large")
            value = value * sp.Integer(10) ** shift
            # Scientific notation keeps its significant digits: 1.5e3 is known to the hundreds.
            places = (places or 0) - shift
        if places is not None:
            self.decimals = places if self.decimals is None else max(self.decimals, places)
        return value

    def _precision(self, mantissa: str, places: int, value: sp.Rational) -> None:
        figures = len(mantissa.replace(".", "").lstrip("0"))
        # More figures than a float holds: as good as exact (and no float overflow).
        relative = 0.0 if value == 0 or figures > 300 else 0.5 * 10.0 ** (-places) / abs(float(value))
        if self.relative is None or relative < self.relative:
            self.relative = relative
        self.figures = figures if self.figures is None else min(self.figures, figures)

    def _based_or_mixed(self, value: sp.Expr, text: str) -> sp.Expr:
        """`204_5` (a numeral in base 5) and `3\\frac14` (a mixed number, never a product)."""
        if self.peek() and self.peek()[1] == "_" and "." not in text:
            self.take()
            base_text = self._subscript_text()
            if base_text.isdigit() and 2 <= int(base_text) <= 36:
                return sp.Symbol(f"{int(text)}_base{int(base_text)}")
            raise ParseFailure(f"unsupported subscript on a number: {base_text[:20]!r}")
        nxt = self.peek()
        if nxt and nxt[1] == "\\frac" and "." not in text and "e" not in text.lower():
            saved = self.pos
            self.take()
            numerator, denominator = self.braced(), self.braced()
            if numerator.is_Integer and denominator.is_Integer and 0 < numerator < denominator:
                return value + sp.Rational(int(numerator), int(denominator))
            self.pos = saved
        return value

    def _subscript_text(self) -> str:
        if self.accept("{"):
            parts = []
            while not self.accept("}"):
                parts.append(self.take()[1])
            return "".join(parts).strip("()")
        return self.take()[1]

    def braced(self) -> sp.Expr:
        if self.accept("{"):
            value = self.expr()
            self.expect("}")
            return value
        # \\frac12 style: a single token argument
        kind, text = self.take()
        if kind == "num":
            if len(text) > 1 and "." not in text:
                self.tokens.insert(self.pos, ("num", text[1:]))
                text = text[0]
            return self.number(text)
        if kind == "name":
            if len(text) > 1:
                self.tokens.insert(self.pos, ("name", text[1:]))
                text = text[0]
            return sp.Symbol(text)
        if kind == "cmd":
            return self.command(text[1:])
        raise ParseFailure(f"expected an argument, found {text!r}")

    def function_argument(self) -> sp.Expr:
        if self.peek() and self.peek()[1] in ("(", "{", "["):
            closing = {"(": ")", "{": "}", "[": "]"}[self.take()[1]]
            value = self.expr()
            self.expect(closing)
            return value
        return self.power()

    def atom(self) -> sp.Expr:
        kind, text = self.take()
        if kind == "num":
            return self._based_or_mixed(self.number(text), text)
        if text in ("(", "[", "{"):
            value = self.expr()
            self.expect({"(": ")", "[": "]", "{": "}"}[text])
            return value
        if text == "|":
            value = self.expr()
            self.expect("|")
            return sp.Abs(value)
        if kind == "cmd":
            return self.command(text[1:])
        if kind == "name":
            return self.name(text)
        raise ParseFailure(f"unexpected {text!r}")

    def matrix(self) -> sp.Basic:
        self.expect("{")
        rows: list[list[sp.Expr]] = [[]]
        while not self.accept("}"):
            if self.accept("&"):
                continue
            if self.accept("\\\\"):
                rows.append([])
                continue
            rows[-1].append(self.expr())
            if sum(len(r) for r in rows) > MAX_MATRIX_CELLS:
                raise TooLarge("matrix too large")
        rows = [r for r in rows if r]
        if not rows or len({len(r) for r in rows}) != 1:
            raise ParseFailure("matrix rows differ in length")
        return sp.ImmutableMatrix(rows)

    def command(self, name: str) -> sp.Expr:
        if name == "frac":
            numerator = self.braced()
            denominator = self.braced()
            return _divide(numerator, denominator)
        if name == "matrix":
            return self.matrix()
        if name == "binom":
            return _guarded_binomial(self.braced(), self.braced())
        if name == "sqrt":
            if self.accept("["):
                index = self.expr()
                self.expect("]")
                radicand = self.braced()
                # An odd root of a negative number is the real one: \sqrt[3]{-8} is -2 (round 15: sympy's
                # principal root is complex, so an honest -2 got nothing).
                if radicand.is_number and radicand.is_negative and index.is_integer and index.is_odd:
                    return -sp.root(-radicand, index)
                return sp.root(radicand, index)
            return sp.sqrt(self.braced())
        if name in ("log", "ln", "lg") and self.accept("_"):
            base = self.braced() if self.peek() and self.peek()[1] == "{" else self.atom()
            return sp.log(self.function_argument(), base)
        if name in _FUNCS:
            if self.accept("^"):
                exponent = self.group_or_unary()
                return _guarded_pow(_FUNCS[name](self.function_argument()), exponent)
            return _FUNCS[name](self.function_argument())
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in _GREEK:
            return self._subscripted(name)
        raise ParseFailure(f"unsupported LaTeX command \\{name}")

    def _subscripted(self, text: str) -> sp.Expr:
        if self.accept("_"):
            return sp.Symbol(f"{text}_{self._subscript_text()}")
        return sp.Symbol(text)

    def name(self, text: str) -> sp.Expr:
        if text in _FUNCS and self.peek() and self.peek()[1] in ("(",):
            return _FUNCS[text](self.function_argument())
        if text in _CONSTANTS:
            return _CONSTANTS[text]
        if len(text) > 2:
            raise ParseFailure(f"unknown word {text[:20]!r}")
        if len(text) > 1:
            # Implicit product of single-letter symbols: "xy" -> x*y.
            self.tokens.insert(self.pos, ("name", text[1:]))
            text = text[0]
        if self.peek() and self.peek()[1] == "_":
            return self._subscripted(text)
        if text == "e":
            return sp.E
        if text == "i":
            return sp.I
        return sp.Symbol(text)


def _divide(numerator: sp.Basic, denominator: sp.Basic) -> sp.Basic:
    if isinstance(denominator, sp.MatrixBase):
        raise ParseFailure("division by a matrix")
    return numerator * sp.Pow(denominator, -1)


def _guarded_binomial(n: sp.Expr, k: sp.Expr) -> sp.Expr:
    if n.is_number and (not n.is_real or abs(sp.N(n)) > MAX_FACTORIAL):
        raise TooLarge("binomial too large to evaluate safely")
    return sp.binomial(n, k)


class Written(NamedTuple):
    value: sp.Basic
    decimals: int | None  # decimal places, when written with a decimal point or exponent
    relative: float | None  # see _Parser.relative
    figures: int | None


def parse_expression(text: str) -> Written:
    tokens = tokenize(text)
    if not tokens:
        raise ParseFailure("empty answer")
    parser = _Parser(tokens)
    value = parser.expr()
    if not parser.at_end():
        raise ParseFailure(f"unexpected {parser.peek()[1]!r} after the expression")
    return Written(value, parser.decimals, parser.relative, parser.figures)
