"""One answer candidate -> a structure: a value, a tuple, a matrix, an interval or union, a
finite set, a solution set (inequalities, set-builder, `x \\in ...`), an equation, a ratio, a
list, or words. Uses the safe expression parser only; never eval."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp

from verifiers.math.inside.angles import DEGREE_WORDS
from verifiers.math.inside.normalise import ParseFailure, TooLarge, normalise, strip_units
from verifiers.math.inside.parse import MAX_EXPANSION, expansion_size, parse_expression
from verifiers.math.inside.times import seconds
from verifiers.math.inside.words import number_from_words

__all__ = ["ParseFailure", "Parsed", "TooLarge", "parse_answer"]

_EMPTY_WORDS = re.compile(
    r"\\emptyset|(?:there\s+(?:is|are)\s+|(?:the\s+\w+\s+)?(?:has|have)\s+)?no\s+(?:real\s+)?(?:solutions?|roots?|such\s+\w+"
    r"|values?)|none|"
    r"does\s*n[o']t\s+exist|dne|empty\s+set", re.IGNORECASE)
_ALL_REALS = re.compile(r"\\Reals|all\s+real(?:\s+numbers)?|\(\s*-\s*\\infty\s*,\s*\+?\s*\\infty\s*\)", re.IGNORECASE)
_YES_NO = ("yes", "no", "true", "false")
_LIST_SEPARATORS = (";", ",", " or ", " and ", "\\text{or}", "\\text{and}")
_FUNCTION_OF = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*\(\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*\)")
_LABEL_PREFIX = re.compile(r"^\s*(?:\\?[A-Za-z]+(?:_\{?[\w,]+\}?)?|\([A-Za-z, ]+\))\s*\\in\s*")


@dataclass
class Parsed:
    """kind: expr | tuple | matrix | interval | union | difference | set | region | equation | ratio | multi |
    text | time | choice."""

    kind: str
    value: object = None
    items: list[Parsed] = field(default_factory=list)
    left_open: bool = False
    right_open: bool = False
    decimals: int | None = None  # decimal places when written as a decimal
    relative: float | None = None  # half a unit in the last written place, relative (0: a written zero)
    figures: int | None = None  # significant figures written
    percent: bool = False
    unit: str = ""
    label: str = ""  # the name a value was given ("x" in "x = 3")
    degrees: bool = False  # an angle written in degrees (a degree sign or word)

    def describe(self) -> str:
        if self.kind in ("expr", "region", "matrix"):
            return sp.sstr(self.value, order="none")[:300]
        if self.kind == "equation":
            return f"{sp.sstr(self.value, order='none')[:300]} = 0"
        if self.kind == "text":
            return str(self.value)
        if self.kind == "choice":
            return f"({self.value})" + (f" {self.items[0].describe()}" if self.items else "")
        if self.kind == "time":
            whole = int(self.value)  # type: ignore[call-overload]
            secs = self.value - whole // 60 * 60  # type: ignore[operator]
            return f"{whole // 3600:02d}:{whole // 60 % 60:02d}:" + (f"{int(secs):02d}" if secs == int(secs) else
                                                                      f"{float(secs):06.3f}")
        if self.kind == "interval":
            lo, hi = self.items
            return f"{'(' if self.left_open else '['}{lo.describe()}, {hi.describe()}{')' if self.right_open else ']'}"
        inner = ", ".join(i.describe() for i in self.items)
        joined = {"tuple": f"({inner})", "set": f"{{{inner}}}", "multi": inner, "ratio": ":".join(
            i.describe() for i in self.items), "union": " U ".join(i.describe() for i in self.items),
            "difference": " \\ ".join(i.describe() for i in self.items)}
        return joined[self.kind][:300]

    def flat(self) -> list[Parsed]:
        """The values of a list (a ± or a list inside a list counts as its values)."""
        if self.kind == "multi":
            return [leaf for item in self.items for leaf in item.flat()]
        return [self]


def parse_answer(text: str, named_values: bool = True) -> Parsed:
    clock = seconds(text)
    if clock is not None:
        return Parsed("time", value=clock)
    normalised = normalise(text)
    parsed = _structure(normalised.text, named_values)
    if normalised.percent:
        parsed.percent = True
    parsed.unit = normalised.unit
    parsed.degrees = normalised.degrees or normalised.unit in DEGREE_WORDS
    return parsed


def _split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth <= 0:
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


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _structure(s: str, named_values: bool) -> Parsed:
    s = s.strip()
    if not s:
        raise ParseFailure("empty answer")
    if s.lower() in _YES_NO:  # "No" is a word, not N times o
        return Parsed("text", value=s.lower())
    if _EMPTY_WORDS.fullmatch(s):
        return Parsed("set", items=[])
    if _ALL_REALS.fullmatch(s):
        return Parsed("region", value=sp.S.Reals)
    choice = _choice(s, named_values) if s[0] == "(" or "A" <= s[0] <= "H" else None
    if choice is not None:
        return choice
    s = _LABEL_PREFIX.sub("", s, count=1) or s
    difference = _split_top(s, ("\\setminus",))
    if len(difference) == 2:  # "\mathbb{R} \setminus \{0\}": compared as a set where both sides are exact
        return Parsed("difference", items=[_structure(part, named_values) for part in difference])
    union = _split_top(s, ("\\cup",))
    if len(union) > 1:
        return Parsed("union", items=[_structure(part, named_values) for part in union])
    solutions = [p for p in _split_top(s, (";",)) if p]
    if len(solutions) > 1 and any(len(_split_top(p, (",",))) > 1 for p in solutions):
        # "p=5, q=2; p=7, q=2": each ;-part is one solution, a tuple.
        return Parsed("multi", items=[_as_tuple(_structure(p, named_values)) for p in solutions])
    parts = [p for p in _split_top(s, _LIST_SEPARATORS) if p]
    if len(parts) > 1:
        return _list(parts, named_values)
    if s.startswith("\\{") and s.endswith("\\}") and _balanced(s[2:-2]):
        return _braced_set(s[2:-2], named_values)
    if s.startswith("{") and s.endswith("}") and _balanced(s[1:-1]) and len(_split_top(s[1:-1], (",",))) > 1:
        # "{1,3}": braces as grouping, read in order.
        grouped = _as_tuple(_structure(s[1:-1], named_values))
        grouped.value = "braces"  # a list in braces: in order against a tuple, as a set against a list
        return grouped
    relation = _relation(s, named_values)
    if relation is not None:
        return relation
    if "\\pm" in s or "\\mp" in s:
        plus = s.replace("\\pm", "+").replace("\\mp", "-")
        minus = s.replace("\\pm", "-").replace("\\mp", "+")
        return Parsed("multi", items=[_structure(plus, named_values), _structure(minus, named_values)])
    bracketed = _bracketed(s, named_values)
    if bracketed is not None:
        return bracketed
    clock = seconds(s)
    if clock is not None:  # "03:12" in a list: a time, never a ratio
        return Parsed("time", value=clock)
    ratio = _split_top(s, (":",))
    if len(ratio) > 1 and all(ratio):
        return Parsed("ratio", items=[_expr(p) for p in ratio])
    try:
        return _expr(strip_units(s)[0] or s)
    except TooLarge:
        raise
    except ParseFailure:
        number = number_from_words(s)
        if number is not None:
            return Parsed("expr", value=sp.Integer(number))
        letters = re.fullmatch(r"\(?([A-Za-z])\)?", s)
        if letters:
            return Parsed("text", value=letters.group(1).lower())
        if re.fullmatch(r"[A-Za-z][A-Za-z \-']*", s):
            return Parsed("text", value=" ".join(s.lower().split()))
        raise


def _choice(s: str, named_values: bool) -> Parsed | None:
    from verifiers.math.inside.choices import choice_parts

    parts = choice_parts(s)
    if parts is None:
        return None
    letter, rest = parts
    if not rest:
        return Parsed("choice", value=letter)
    try:
        value = _structure(rest, named_values)
    except TooLarge:
        raise
    except ParseFailure:
        return Parsed("choice", value=letter)
    return Parsed("choice", value=letter, items=[] if value.kind == "text" else [value])


def _list(parts: list[str], named_values: bool) -> Parsed:
    items = []
    for part in parts:
        if part.lower() in ("and", "or", "\\text{and}", "\\text{or}"):
            continue
        items.append(_structure(part, named_values))
    if len(items) == 1:
        return items[0]
    if all(item.kind == "region" for item in items):
        # "x < 0 or x > 1": one solution set.
        return Parsed("region", value=sp.Union(*[item.value for item in items]))
    return Parsed("multi", items=items)


def _as_tuple(parsed: Parsed) -> Parsed:
    return Parsed("tuple", items=parsed.items) if parsed.kind == "multi" else parsed


def _braced_set(inner: str, named_values: bool) -> Parsed:
    builder = _split_top(inner, ("\\mid", "|", ":"))
    if len(builder) == 2 and builder[0] and builder[1]:
        region = _relation(builder[1], named_values=False)
        if region is not None and region.kind == "region":
            return region
    if not inner.strip():
        return Parsed("set", items=[])
    items = [_structure(p, named_values) for p in _split_top(inner, (",", ";")) if p]
    return Parsed("set", items=[leaf for item in items for leaf in item.flat()])


def _bracketed(s: str, named_values: bool) -> Parsed | None:
    if len(s) < 2 or s[0] not in "([" or s[-1] not in ")]" or not _balanced(s[1:-1]):
        return None
    inner = _split_top(s[1:-1], (",", ";"))
    if len(inner) < 2:
        return None
    infinite = "infty" in s or "oo" in s
    if len(inner) == 2 and (s[0] == "[" or s[-1] == "]" or infinite):
        return Parsed("interval", items=[_expr(inner[0]), _expr(inner[1])],
                      left_open=s[0] == "(", right_open=s[-1] == ")")
    if s[0] == "(" and s[-1] == ")":
        return Parsed("tuple", items=[_structure(p, named_values) for p in inner])
    if s[0] == "[" and s[-1] == "]":  # "[2, 3, 5, 7]": a list written as in Python
        return _list(inner, named_values)
    return None


def _expr(s: str) -> Parsed:
    value, decimals, relative, figures = parse_expression(s)
    kind = "matrix" if isinstance(value, sp.MatrixBase) else "expr"
    return Parsed(kind, value=value, decimals=decimals, relative=relative, figures=figures)


def _additive(s: str) -> bool:
    """A sum or difference at the top level ("2x+z"), as opposed to a single term or label."""
    body = s.strip().lstrip("+-").strip()
    return len(_split_top(body, ("+", "-"))) > 1


def _relation(s: str, named_values: bool) -> Parsed | None:
    inequality = _split_relations(s)
    if inequality is not None:
        return inequality
    sides = _split_top(s, ("=",))
    if len(sides) < 2 or not all(sides):
        return None
    left, right = sides[0], sides[-1]
    try:
        value = _structure(right, named_values)
    except ParseFailure:
        value = None
    constant = value is not None and not _has_symbols(value)
    if named_values and constant and (not _additive(left) or len(sides) > 2):
        # "x = 3", "f(x) = 1", "|AB| = 1", "(p, q) = (3, 2)", "x = 5+5+1 = 11": the value is named.
        assert value is not None
        value.label = re.sub(r"[\s{}]", "", left)
        return value
    if len(sides) > 2:
        left = sides[-2]
    lhs, rhs = _expr(left), _expr(right)
    if lhs.kind != "expr" or rhs.kind != "expr":
        raise ParseFailure("an equation between structures")
    if expansion_size(lhs.value - rhs.value) > MAX_EXPANSION:
        raise TooLarge("equation too large to expand safely")
    equation = Parsed("equation", value=sp.expand(lhs.value - rhs.value), decimals=lhs.decimals or rhs.decimals)
    defined = isinstance(lhs.value, sp.Symbol) and lhs.value not in rhs.value.free_symbols
    if named_values and (defined or _FUNCTION_OF.fullmatch(left.strip())):
        # "y = 2x + 1" defines y, "f(x) = x^2" defines f: it may also stand for its right side.
        equation.items = [rhs]
    return equation


def _has_symbols(parsed: Parsed) -> bool:
    if parsed.kind in ("expr", "matrix"):
        return bool(getattr(parsed.value, "free_symbols", set()))
    if parsed.kind in ("equation", "region"):
        return True
    return any(_has_symbols(item) for item in parsed.items)


def _split_relations(s: str) -> Parsed | None:
    """Inequalities, chained or reversed, as the solution set of their one variable."""
    tokens = re.split(r"(<=|>=|!=|<|>)", s)
    if len(tokens) < 3:
        return None
    sides = [_expr(t) for t in tokens[0::2]]
    ops = tokens[1::2]
    conditions = []
    for left, op, right in zip(sides, ops, sides[1:], strict=False):
        lhs, rhs = left.value, right.value
        conditions.append({"<": sp.Lt, ">": sp.Gt, "<=": sp.Le, ">=": sp.Ge}[op](lhs, rhs) if op != "!=" else
                          sp.Ne(lhs, rhs))
    symbols = set().union(*(side.value.free_symbols for side in sides))
    if len(symbols) != 1:
        # "0 < f(x) < 1": one unknown quantity between constants is the variable.
        unknowns = {side.value for side in sides if side.value.free_symbols}
        if len(unknowns) != 1:
            return Parsed("text", value=" ".join(s.split()))
        unknown = unknowns.pop()
        conditions = [c.subs(unknown, _UNKNOWN) for c in conditions]
        symbols = {_UNKNOWN}
    symbol = symbols.pop()
    region: sp.Set = sp.S.Reals
    for condition in conditions:
        if condition is sp.true or condition is sp.false:
            region = region if condition is sp.true else sp.S.EmptySet
            continue
        region = region.intersect(sp.solveset(condition, symbol, sp.S.Reals))
    return Parsed("region", value=region)


_UNKNOWN = sp.Symbol("unknown", real=True)
