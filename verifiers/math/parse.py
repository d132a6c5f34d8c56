"""Safe math answer parser: LaTeX or plain text -> sympy objects, without `eval`.

sympy's own `parse_expr`/`sympify` call `eval` on the input; this module never does. It
is a small recursive-descent parser that builds sympy objects directly, and it refuses
values too large to compute (huge powers, factorials) before sympy tries. It still runs
inside the sandbox, under time and memory limits, as defence in depth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp

MAX_INPUT_CHARS = 2000
MAX_RESULT_BITS = 1 << 16
MAX_FACTORIAL = 2000
MAX_DEPTH = 60


class ParseFailure(ValueError):
    pass


class TooLarge(ParseFailure):
    pass


@dataclass
class Parsed:
    """A parsed answer: an expression, or a structure of answers."""

    kind: str  # expr | tuple | interval | set | multi | union | text
    value: object = None
    items: list[Parsed] = field(default_factory=list)
    left_open: bool = False
    right_open: bool = False
    decimals: int | None = None  # decimal places when the answer was written as a decimal

    def describe(self) -> str:
        if self.kind == "expr":
            return sp.sstr(self.value)[:300]
        if self.kind == "text":
            return str(self.value)
        if self.kind == "interval":
            lo, hi = self.items
            return f"{'(' if self.left_open else '['}{lo.describe()}, {hi.describe()}{')' if self.right_open else ']'}"
        inner = ", ".join(i.describe() for i in self.items)
        return {"tuple": f"({inner})", "set": f"{{{inner}}}", "multi": inner, "union": " U ".join(
            i.describe() for i in self.items)}[self.kind]


# ----------------------------------------------------------------------- normalisation

_REMOVE = [
    r"\\displaystyle", r"\\left", r"\\right", r"\\!", r"\\,", r"\\;", r"\\:", r"\\ ", "~",
    r"\\big", r"\\Big", r"\\bigg", r"\\Bigg", r"\\limits",
]
_UNIT_WORDS = {
    "cm", "m", "km", "mm", "meter", "meters", "metre", "metres", "inch", "inches", "feet", "foot", "ft",
    "mile", "miles", "second", "seconds", "sec", "minute", "minutes", "min", "hour", "hours", "hr", "hrs",
    "day", "days", "week", "weeks", "year", "years", "dollar", "dollars", "cent", "cents", "unit", "units",
    "degree", "degrees", "kg", "g", "gram", "grams", "pound", "pounds", "lb", "lbs", "liter", "liters",
    "litre", "litres", "ml", "square", "sq", "cubic", "people", "students", "apples", "ways", "points",
    "percent", "mph", "km/h", "items", "times", "steps", "books", "marbles", "coins", "cookies", "pages",
}
_TEXT_CMDS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname|mathit)\s*\{([^{}]*)\}")


def normalise(text: str) -> str:
    if len(text) > MAX_INPUT_CHARS:
        raise ParseFailure(f"answer longer than {MAX_INPUT_CHARS} characters")
    s = text.strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = s.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    for pattern in _REMOVE:
        s = re.sub(pattern + r"(?![a-zA-Z])", "", s)
    s = _TEXT_CMDS.sub(lambda m: " " + m.group(1) + " ", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)
    s = s.replace("°", "").replace("\\degree", "").replace("\\%", "").replace("%", "")
    s = s.replace("\\$", "").replace("$", "")
    s = re.sub(r"\\(?:cdot|times|ast)(?![a-zA-Z])", "*", s)
    s = re.sub(r"\\div(?![a-zA-Z])", "/", s)
    s = s.replace("×", "*").replace("·", "*").replace("÷", "/").replace("−", "-").replace("π", "\\pi")
    s = s.replace("∞", "\\infty").replace("√", "\\sqrt")
    s = re.sub(r"\\(?:dots|ldots|cdots)", "", s)
    # Thousands separators: 1,234,567 (groups of exactly three digits, no spaces).
    # Only a whole answer: inside brackets "91,120" is a pair, not ninety-one thousand.
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(\d)\\?\s+(?=\d{3}\b)", r"\1", s) if re.fullmatch(r"\d{1,3}(\s\d{3})+", s) else s
    s = _strip_units(s)
    return s.strip().rstrip(".").strip()


def _strip_units(s: str) -> str:
    words = s.split()
    while len(words) > 1 and words[-1].lower().strip(".") in _UNIT_WORDS:
        words.pop()
    while len(words) > 1 and words[-1].lower().strip(".") in {"^2", "^3"}:
        words.pop()
    return " ".join(words)


# ----------------------------------------------------------------------------- lexing

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*|\.\d+|\d+)|(?P<cmd>\\[a-zA-Z]+|\\\{|\\\}|\\\|)|(?P<name>[a-zA-Z]+)"
    r"|(?P<op>\*\*|<=|>=|!=|[-+*/^!(),\[\]{}=|<>_:]))"
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
        tokens.append((kind, m.group(kind)))
    return tokens


# ---------------------------------------------------------------------------- parsing


def _guarded_pow(base: sp.Expr, exp: sp.Expr) -> sp.Expr:
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
    return sp.Pow(base, exp)


def _guarded_factorial(value: sp.Expr) -> sp.Expr:
    if value.is_number and (not value.is_real or abs(sp.N(value)) > MAX_FACTORIAL):
        raise TooLarge("factorial too large to evaluate safely")
    return sp.factorial(value)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.decimals: int | None = None
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
                value = sp.Add(value, self.term())
            elif self.accept("-"):
                value = sp.Add(value, -self.term())
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
            return value not in ("\\}", "\\cup", "\\le", "\\ge", "\\leq", "\\geq", "\\neq", "\\pm", "\\to", "\\|")
        return value in ("(", "{")

    # term := unary (('*'|'/'|implicit) unary)*
    def term(self) -> sp.Expr:
        value = self.unary()
        while True:
            if self.accept("*"):
                value = sp.Mul(value, self.unary())
            elif self.accept("/"):
                denominator = self.unary()
                value = sp.Mul(value, sp.Pow(denominator, -1))
            elif self._starts_atom():
                value = sp.Mul(value, self.power())
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
        if "." in text:
            places = len(text.split(".", 1)[1])
            self.decimals = max(self.decimals or 0, places)
            return sp.Rational(text if not text.endswith(".") else text[:-1])
        return sp.Integer(text)

    def braced(self) -> sp.Expr:
        if self.accept("{"):
            value = self.expr()
            self.expect("}")
            return value
        # \frac12 style: a single token argument
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
        raise ParseFailure(f"expected an argument, found {text!r}")

    def function_argument(self) -> sp.Expr:
        if self.peek() and self.peek()[1] in ("(", "{"):
            closing = ")" if self.take()[1] == "(" else "}"
            value = self.expr()
            self.expect(closing)
            return value
        return self.power()

    def atom(self) -> sp.Expr:
        kind, text = self.take()
        if kind == "num":
            return self.number(text)
        if text == "(":
            value = self.expr()
            self.expect(")")
            return value
        if text == "{":
            value = self.expr()
            self.expect("}")
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

    def command(self, name: str) -> sp.Expr:
        if name == "frac":
            numerator = self.braced()
            denominator = self.braced()
            return sp.Mul(numerator, sp.Pow(denominator, -1))
        if name == "sqrt":
            if self.accept("["):
                index = self.expr()
                self.expect("]")
                return sp.root(self.braced(), index)
            return sp.sqrt(self.braced())
        if name in ("log", "ln") and self.accept("_"):
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
            return sp.Symbol(name)
        raise ParseFailure(f"unsupported LaTeX command \\{name}")

    def name(self, text: str) -> sp.Expr:
        if text in _FUNCS and self.peek() and self.peek()[1] in ("(",):
            return _FUNCS[text](self.function_argument())
        if text in _CONSTANTS:
            return _CONSTANTS[text]
        if text in ("sqrt",):
            return sp.sqrt(self.function_argument())
        if len(text) > 2:
            raise ParseFailure(f"unknown word {text[:20]!r}")
        if len(text) > 1:
            # Implicit product of single-letter symbols: "xy" -> x*y.
            self.tokens.insert(self.pos, ("name", text[1:]))
            text = text[0]
        if text == "e":
            return sp.E
        if text == "i":
            return sp.I
        return sp.Symbol(text)


def parse_expression(text: str) -> tuple[sp.Expr, int | None]:
    tokens = tokenize(text)
    if not tokens:
        raise ParseFailure("empty answer")
    parser = _Parser(tokens)
    value = parser.expr()
    if not parser.at_end():
        raise ParseFailure(f"unexpected {parser.peek()[1]!r} after the expression")
    return value, parser.decimals


# ------------------------------------------------------------------------ structures


def _split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            for sep in seps:
                if s.startswith(sep, i):
                    parts.append(s[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _strip_variable_prefix(s: str) -> str:
    """`x = 3` -> `3`; leaves a general equation `x + y = 3` alone."""
    m = re.fullmatch(r"\s*\\?[a-zA-Z](?:_\{?\w+\}?)?\s*(?:\([a-z]\))?\s*=\s*(.+)", s)
    if m and "=" not in m.group(1):
        return m.group(1)
    return s


def _expr(s: str) -> Parsed:
    value, decimals = parse_expression(s)
    return Parsed("expr", value=value, decimals=decimals)


def _interval_end(s: str) -> Parsed:
    return _expr(s.replace("-\\infty", "-oo").replace("\\infty", "oo"))


def parse_answer(text: str) -> Parsed:
    s = normalise(text)
    if not s:
        raise ParseFailure("empty answer")
    union = _split_top(s, ("\\cup",))
    if len(union) > 1:
        return Parsed("union", items=[parse_answer(part) for part in union])
    multi = [p for p in _split_top(s, (" or ", " and ", ";")) if p]
    if len(multi) > 1:
        return Parsed("multi", items=[parse_answer(p) for p in multi])
    if s.startswith("\\{") and s.endswith("\\}"):
        inner = s[2:-2]
        return Parsed("set", items=[parse_answer(p) for p in _split_top(inner, (",",)) if p])
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        inner_parts = _split_top(s[1:-1], (",",))
        if _balanced(s[1:-1]) and len(inner_parts) > 1:
            if len(inner_parts) == 2 and (s[0] == "[" or s[-1] == "]" or "infty" in s or "oo" in s):
                return Parsed(
                    "interval",
                    items=[_interval_end(inner_parts[0]), _interval_end(inner_parts[1])],
                    left_open=s[0] == "(",
                    right_open=s[-1] == ")",
                )
            if s[0] == "(" and s[-1] == ")":
                return Parsed("tuple", items=[parse_answer(p) for p in inner_parts])
    parts = _split_top(s, (",",))
    if len(parts) > 1:
        return Parsed("multi", items=[parse_answer(p) for p in parts if p])
    s = _strip_variable_prefix(s)
    try:
        return _expr(s)
    except TooLarge:
        raise
    except ParseFailure:
        if re.fullmatch(r"[A-Za-z][A-Za-z \-']*", s):
            return Parsed("text", value=" ".join(s.lower().split()))
        raise


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0
