"""Text normalisation of one answer candidate before parsing: LaTeX spacing and wrappers,
`\\text{}` and units, currency, degrees, percent, thousands separators, relation symbols.
Pure string work (linear regular expressions, bounded input)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

MAX_INPUT_CHARS = 2000


class ParseFailure(ValueError):
    pass


class TooLarge(ParseFailure):
    pass


@dataclass(frozen=True)
class Normalised:
    text: str
    percent: bool = False  # written with %, "percent", "pct"
    unit: str = ""  # the unit words stripped from the end, lower case
    degrees: bool = False  # written with a degree sign (`^\\circ`, `°`, `\\degree`)


_REMOVE = [
    r"\\displaystyle", r"\\textstyle", r"\\left", r"\\right", r"\\middle", r"\\!", r"\\;", r"\\:", r"\\ ",
    r"\\quad", r"\\qquad", r"\\big", r"\\Big", r"\\bigg", r"\\Bigg", r"\\bigl", r"\\bigr", r"\\Bigl", r"\\Bigr",
    r"\\limits", r"\\nolimits", r"\\mathstrut", r"\\phantom\{[^{}]*\}", r"\\hspace\*?\{[^{}]*\}",
    r"\\enspace", r"\\thinspace", r"\\medspace", r"\\thickspace", r"\\hline", r"\\boxed", r"\\fbox",
    # presentation that renders nothing, or the same value: invisible boxes, sizes, a font on one token
    r"\\[hv]phantom\{[^{}]*\}", r"\\tiny", r"\\scriptsize", r"\\footnotesize", r"\\small", r"\\normalsize",
    r"\\large", r"\\Large", r"\\LARGE", r"\\huge", r"\\Huge",
    r"\\(?:mathbf|mathrm|boldsymbol|bm|pmb|textbf)(?=\s*[0-9A-Za-z])",
]
_REMOVE_RE = re.compile("|".join(r"(?<!\\)" + p + r"(?![a-zA-Z])" for p in _REMOVE))
# Doubled backslashes before a command (a raw string escaped twice): "\\\\frac" -> "\\frac".
_DOUBLED = re.compile(r"(?<!\\)\\\\(?=(?:boxed|fbox|frac|dfrac|tfrac|left|right|text|mathrm|sqrt|le|ge|leq|geq|"
                      r"neq|lt|gt|in|infty|pi|cdot|times|pm|cup|begin|end|quad|qquad)(?![a-zA-Z]))")


# Full-width forms (（1，2）, ２, ：) are their ASCII letters; CJK punctuation reads as ASCII punctuation.
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {0x3000: " ", 0x3001: ", ", 0x3002: ". ",
                                                              0x3010: "[", 0x3011: "]"}


def unescape(text: str) -> str:
    return _DOUBLED.sub(r"\\", text.translate(_FULL_WIDTH))


_TEXT_CMDS = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mathrm|mathbf|mathit|mathsf|mbox|hbox|operatorname|emph"
    r"|bm|boldsymbol|pmb|underline|smash|mathrlap|mathllap|mathclap)"
    r"\s*\{([^{}]*)\}")
# Presentation only: a colour is not part of the value (`\\color{red}5`, `\\textcolor{red}{5}`), and
# angle brackets delimit a vector like parentheses (`\\langle 1, 2 \\rangle`).
_COLOUR = re.compile(r"\\color\s*\{[^{}]*\}")
_COLOURED = re.compile(r"\\(?:textcolor|colorbox)\s*\{[^{}]*\}\s*\{([^{}]*)\}")
_ANGLES = re.compile(r"\\langle(?![a-zA-Z])|\u27e8|\\rangle(?![a-zA-Z])|\u27e9")
# A mixed number written with a slash, the whole answer: "2 1/2", "-3 3/4" (a proper fraction).
_MIXED_SLASH = re.compile(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)")


def _presentation(s: str) -> str:
    s = _COLOURED.sub(lambda m: " " + m.group(1) + " ", _COLOUR.sub(" ", s))
    return _ANGLES.sub(lambda m: "(" if m.group(0) in ("\\langle", "\u27e8") else ")", s)


# A repeating decimal: `0.\\overline{3}` is 1/3, `1.2\\overline{45}` is 1.2454545...
_REPEATING = re.compile(r"(\d*)\.(\d*)\\overline\s*\{\s*(\d{1,50})\s*\}")


def _repeating(s: str) -> str:
    def fraction(m: re.Match[str]) -> str:
        whole, fixed, period = m.group(1) or "0", m.group(2), m.group(3)
        if len(whole) + len(fixed) > 50:
            return m.group(0)
        numerator = int(whole + fixed + period) - int(whole + fixed)
        return f"\\frac{{{numerator}}}{{{10 ** len(fixed) * (10 ** len(period) - 1)}}}"
    return _REPEATING.sub(fraction, s)


def _mixed_slash(s: str) -> str:
    m = _MIXED_SLASH.fullmatch(s)
    if m and 0 < int(m.group(3)) < int(m.group(4)):
        return f"{m.group(1)}{m.group(2)}\\frac{{{m.group(3)}}}{{{m.group(4)}}}"
    return s


_UNIT_WORDS = {
    "cm", "m", "km", "mm", "nm", "meter", "meters", "metre", "metres", "inch", "inches", "in", "feet", "foot",
    "ft", "yd", "yard", "yards", "mile", "miles", "mi", "second", "seconds", "sec", "s", "minute", "minutes",
    "min", "mins", "hour", "hours", "hr", "hrs", "h", "day", "days", "week", "weeks", "month", "months", "year",
    "years", "dollar", "dollars", "cent", "cents", "euro", "euros", "yuan", "yen", "pound", "pounds", "rupees",
    "unit", "units", "degree", "degrees", "deg", "radian", "radians", "rad", "kg", "g", "mg", "gram", "grams",
    "kilogram", "kilograms", "lb", "lbs", "oz", "ounce", "ounces", "ton", "tons", "liter", "liters", "litre",
    "litres", "l", "ml", "gallon", "gallons", "square", "sq", "cubic", "mph", "kmh", "kph", "j", "joule",
    "joules", "n", "newton", "newtons", "w", "watt", "watts", "v", "volt", "volts", "hz", "k", "kelvin", "pa",
    "celsius", "fahrenheit", "ways", "times", "people", "persons", "students", "points", "items", "steps",
    "pieces", "numbers", "integers", "values", "solutions", "terms", "digits", "cookies", "apples", "books",
    "pages", "marbles", "coins", "boxes", "cars", "trees", "handshakes", "games", "matches", "tiles", "cubes",
}
_PERCENT = re.compile(r"\\%|%|\s*\b(?:percent|per\s+cent|percentage|pct)\b\.?", re.IGNORECASE)
_CURRENCY = re.compile(r"\\\$|\$|€|£|¥|\\euro|\\pounds|\b(?:USD|EUR|Rs)\b")
_RELATIONS = [
    (r"\\leqslant|\\leq|\\le(?![a-zA-Z])|≤|=<", "<="), (r"\\geqslant|\\geq|\\ge(?![a-zA-Z])|≥|=>(?!\s*\\)", ">="),
    (r"\\neq|\\ne(?![a-zA-Z])|≠|=/=", "!="), (r"\\lt(?![a-zA-Z])", "<"), (r"\\gt(?![a-zA-Z])", ">"),
]
_UNICODE = {"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-", "π": "\\pi", "∞": "\\infty", "√": "\\sqrt",
            "℃": "°C", "℉": "°F",
            "∪": "\\cup", "∩": "\\cap", "∈": "\\in", "∅": "\\emptyset", "²": "^2", "³": "^3", "±": "\\pm",
            "或者": " or ", "或": " or ", "且": " and ", "和": " and "}


# "negative 5", "minus 5": the sign of the number after it (round 15: the word was dropped, so
# "negative 5" answered a gold of 5 and not one of -5). Not after a value: "10 minus 3" subtracts.
SIGN_WORD = re.compile(r"(?<![\d)}\]]\s)(?<![\w)}\]])(?:negative|minus)\s+(?=\$?\s*\d)", re.IGNORECASE)
# Scale words after a number: one table for number words, answers read with a scale word, and the
# last-number rule ("about 2.5 million").
SCALE_WORDS = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
# A last word after a number that changes its value is no unit: "5 squared" is 25, "3 halves" 3/2,
# "0.3 recurring" 1/3 (round 15: each was stripped, so it matched the bare number). Before another word
# it describes what is counted ("3 repeating digits"); "squared" and "cubed" after a unit word are part
# of the unit ("12 cm squared"). "below" is never a unit: "5 below zero" is -5.
_VALUE_WORDS = {"squared", "cubed", "inverse", "reciprocal", "recurring", "repeating", "factorial", "ish",
                "halves", "thirds", "fourths", "fifths", "sixths", "sevenths", "eighths", "ninths", "tenths",
                "hundredths", "thousandths", "millionths"}
_UNIT_POWERS = {"squared", "cubed"}
# What a one-letter unit may follow: digits and the signs of a number ("5", "2 * 10^{8}", "\\frac{1}{2}").
_PLAIN_NUMBER = re.compile(r"[\s\d.*/^{}()+-]*\d[\s\d.*/^{}()+-]*")
_DEGREE_SIGN = r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![a-zA-Z])|°|\\degree(?![a-zA-Z])"
_TEMPERATURE = re.compile(rf"\s*(?:{_DEGREE_SIGN})\s*([CF])(?![A-Za-z])")
_CJK_UNIT = re.compile(r"(.*[\d}])\s*([\u3400-\u9fff]+)\s*", re.DOTALL)


def strip_units(s: str) -> tuple[str, str]:
    """Trailing unit words after a value ("12 cm", "15 cm^2", "3 apples", "5 m/s")."""
    unit: list[str] = []
    cjk = _CJK_UNIT.fullmatch(s)
    if cjk:  # "12个", "3.5 米": a CJK word after a value is its unit
        s, unit = cjk.group(1), [cjk.group(2)]
    while True:
        m = re.search(r"(?<![\\A-Za-z])([A-Za-z]+(?:\s*/\s*[A-Za-z]+)?)(?:\s*\^\s*\{?[23]\}?)?\s*$", s)
        if not m:
            break
        before = s[:m.start()].rstrip()
        word = m.group(1).lower()
        known = word in _UNIT_WORDS or all(w.strip() in _UNIT_WORDS for w in word.split("/"))
        # A unit follows a value, not an operator or a variable ("2x", "3 \\cdot cm").
        if not re.search(r"\d", before) or before[-1:] in "+-*/=(,^_{" or not (known or len(word) >= 3):
            break
        glued = before[-1:].isdigit() and not s[m.start() - 1].isspace()
        if glued and (not known or len(word) == 1 and "^" not in m.group(0)):
            break
        value_word = word in _VALUE_WORDS and not unit and not (word in _UNIT_POWERS and before[-1:].isalpha())
        if value_word or word == "below":
            break
        # One letter after a symbol is a variable ("2\\pi k", "x + 3 n"): a unit that short only
        # follows a plain number (round 15: "2\\pi k" lost its k, so a gold's k or n was ignored).
        if len(word) == 1 and not _PLAIN_NUMBER.fullmatch(re.split(r"[,;=<>]", before)[-1].replace("\\frac", "")):
            break
        # One spelling per unit: "cm^{2}", "cm ^2" and "cm^2" are the same unit.
        unit.insert(0, re.sub(r"[\s{}]", "", m.group(0)).lower())
        s = before
    return s, " ".join(unit)


def _thousands(s: str) -> str:
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d{3})", r"\1", s)  # 14{,}916
    s = re.sub(r"(\d),\\!\s*(?=\d{3})", r"\1", s)  # 12,\!000
    s = re.sub(r"(\d)\\[,;]\s*(?=\d{3}\b)", r"\1", s)  # 1\,000
    whole = s.strip()
    sign = r"-?"
    if re.fullmatch(r"-?0,\d+", whole):
        return whole.replace(",", ".")
    if re.fullmatch(sign + r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", whole):
        return whole.replace(",", "")
    if re.fullmatch(sign + r"\d{1,3}(?: \d{3})+(?:\.\d+)?", whole):
        return whole.replace(" ", "")
    # Other locales: "1.234.567" (two points or more: never a decimal) and "1'000'000" (Swiss).
    if re.fullmatch(sign + r"\d{1,3}(?:\.\d{3}){2,}", whole):
        return whole.replace(".", "")
    if re.fullmatch(sign + r"\d{1,3}(?:['\u2019]\d{3})+(?:\.\d+)?", whole):
        return re.sub("['\u2019]", "", whole)
    # A decimal comma where a list cannot be meant: "1000,99", "2,74", "0,111".
    m = re.fullmatch(r"(-?)(\d+),(\d+)", whole)
    if m and (m.group(2) == "0" or len(m.group(3)) not in (3,) and (len(m.group(2)) > 1 or len(m.group(3)) > 1)):
        return f"{m.group(1)}{m.group(2)}.{m.group(3)}"
    return s


# A phrase that qualifies an answer ("for all x", "where s is the side", "for x > 0") and a
# trailing condition on a variable after a comma ("\ln x, x > 0") are not part of the value.
_QUALIFIER = re.compile(r"(?<=\S)\s*,?\s*[(\[]?\s*(?:\\forall\b|\b(?:for|where|when|whenever|provided|such\s+that|"
                        r"valid|defined)\b)(?:\s|\\).*", re.IGNORECASE | re.DOTALL)
_CONDITION = re.compile(r"(.+?),\s*([A-Za-z](?:_\{?\w+\}?)?\s*(?:<=|>=|!=|<|>|\\in\b)[^,]+)", re.DOTALL)
_RELATION_MARK = re.compile(r"<|>|!=|\\in\b")


# A word before the value that says how exact it is ("about 12", "approximately 3.142", "exactly 12")
# is no part of it, as `\approx` before a value is not (round 10: these were unknown words, so an honest
# "<answer>approximately 3.142</answer>" got invalid_format); likewise "(approximately)" after it.
_ADVERB_BEFORE = re.compile(r"^(?:approximately|approx\.?|about|around|roughly|circa|exactly|precisely|only|just)"
                            r"\s+(?=[-+\d.\\($])", re.IGNORECASE)
_ADVERB_AFTER = re.compile(r"\s*\(\s*(?:approximately|approx\.?|roughly|exactly)\s*\)\s*$", re.IGNORECASE)


def _without_adverb(s: str) -> str:
    return _ADVERB_AFTER.sub("", _ADVERB_BEFORE.sub("", s.strip()))


def _without_qualifier(s: str) -> str:
    qualifier = _QUALIFIER.search(s)
    if qualifier and re.search(r"[\d=\\^]", s[:qualifier.start()]):
        s = s[:qualifier.start()].rstrip(" ,;")
    condition = _CONDITION.fullmatch(s.strip())
    if condition and not _RELATION_MARK.search(condition.group(1)):
        s = condition.group(1)
    return s


# An angle in degrees inside a trigonometric function is that many pi/180 radians: `\\sin 60^\\circ`,
# `\\cos(45°)`, `\\tan 30 degrees`; elsewhere a degree sign only marks the value (`angles.py`).
_TRIG_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])(?:\^\s*\{?\s*\d\s*\}?)?)\s*(\(?)\s*(\d+(?:\.\d+)?)\s*"
    r"(?:\^\s*\{?\s*\\circ\s*\}?|\\circ(?![a-zA-Z])|°|\\degree(?![a-zA-Z])|\s*degrees?\b)\s*(\)?)")


def _trig_degrees(s: str) -> str:
    def radians(m: re.Match[str]) -> str:
        if bool(m.group(2)) != bool(m.group(4)):
            return m.group(0)
        return f"{m.group(1)}({m.group(3)}\\pi/180)"
    return _TRIG_DEGREES.sub(radians, s)


@functools.lru_cache(maxsize=1024)
def normalise(text: str) -> Normalised:
    """Cached: a group's gold and repeated answers are normalised once (the result is immutable)."""
    return _normalise(text)


def _normalise(text: str) -> Normalised:
    if len(text) > MAX_INPUT_CHARS:
        raise ParseFailure(f"answer longer than {MAX_INPUT_CHARS} characters")
    s = unescape(text.strip())
    for char, repl in _UNICODE.items():
        s = s.replace(char, repl)
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", s).strip()
    s = _thousands(s)
    # "\," and "~" are LaTeX spaces ("8 \mathrm{~cm}^2"); an answer never holds a literal tilde.
    s = s.replace("\\,", " ").replace("~", " ")
    s = _REMOVE_RE.sub(" ", s)
    s = _repeating(_presentation(s))
    for _ in range(3):  # nested \text{\textbf{...}}
        s = _TEXT_CMDS.sub(lambda m: " " + m.group(1) + " ", s)
    s = re.sub(r"\\[dtc]frac", r"\\frac", s)
    s = re.sub(r"\\[dt]binom", r"\\binom", s)
    s = re.sub(r"\\begin\{array\}\{[^{}]*\}", r"\\begin{array}", s)
    s = re.sub(r"\\begin\{[pbBvV]?matrix\}|\\begin\{array\}|\\begin\{smallmatrix\}", r"\\matrix{", s)
    s = re.sub(r"\\end\{[pbBvV]?matrix\}|\\end\{array\}|\\end\{smallmatrix\}", "}", s)
    s = _trig_degrees(s)
    # A temperature ("25^\circ C", "25°C", "25 ℃") is the value with a unit word, not an angle and not
    # the product 25·C (round 15: a gold of 25°C refused an honest 25).
    s = _TEMPERATURE.sub(lambda m: " celsius" if m.group(1) == "C" else " fahrenheit", s)
    s, degree_signs = re.subn(_DEGREE_SIGN, "", s)
    percent = False
    if _PERCENT.search(s):
        percent = True
        s = _PERCENT.sub("", s)
    s = _CURRENCY.sub("", s)
    s = re.sub(r"\\(?:cdot|times|ast)(?![a-zA-Z])", "*", s)
    s = re.sub(r"\\div(?![a-zA-Z])", "/", s)
    s = re.sub(r"\\(?:dots|ldots|cdots|dotsc|dotsb)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\(?:varnothing|emptyset)(?![a-zA-Z])|\\\{\s*\\\}", r"\\emptyset", s)
    s = re.sub(r"\\mathbb\s*\{?\s*R\s*\}?", r"\\Reals", s)
    for pattern, repl in _RELATIONS:
        s = re.sub(pattern, repl, s)
    s = _without_qualifier(_without_adverb(SIGN_WORD.sub("-", s)))
    # The value before an approximation counts ("1/3 \approx 0.33"), unless it is only a name ("x \approx 11").
    exact, *approx = re.split(r"\\approx|≈|\\sim(?![a-zA-Z])", s, maxsplit=1)
    s = exact if not approx or re.search(r"\d", exact) else approx[0]
    s = re.sub(r"(?<=[)\]])\s*(?:or|and)\s*(?=[(\[])", ", ", s)
    s = _thousands(s.strip())
    s = s.strip().rstrip(".,;").strip()
    s, unit = strip_units(s)
    s = s.strip().rstrip(".,;").strip()
    s = _mixed_slash(s)
    return Normalised(s, percent, unit, degree_signs > 0)
