"""Tagged plain-JSON encoding of Python values that cross between grader and candidate.

Standard library only: this module runs inside both sandboxed parties. Nothing here ever
unpickles or evaluates: decoding builds only built-in containers and scalars, so an
object the candidate made (say, one whose `__eq__` is always true) can never reach the
test code. Only exact built-in types are encoded; a subclass of `int` or `str` is refused
rather than silently converted, because its methods are candidate code.

Shapes (every JSON object is a tag, so plain JSON never collides with one):
  None, bool, str          -> themselves
  int                      -> JSON int, or {"$int": hex} when too long for a decimal literal
  float                    -> JSON float, or {"$float": "nan" | "inf" | "-inf"}
  list                     -> JSON array
  tuple / set / frozenset  -> {"$tuple" | "$set" | "$frozenset": [...]}
  dict                     -> {"$dict": [[key, value], ...]} (keys of any encodable type)
  bytes / bytearray        -> {"$bytes" | "$bytearray": base64}
  complex                  -> {"$complex": [real, imag]}
  range                    -> {"$range": [start, stop, step]}
  dict keys/values/items   -> {"$keys" | "$values": [...]}, {"$items": [[key, value], ...]}
  iterator (a generator, map, filter, zip, iter(...))
                           -> {"$iter": [...]}: drained where it was made (at most MAX_ITER_ITEMS
                              items), arrives as an iterator over a list. Round 10: an honest
                              generator or `range` answer to a test that iterates (`list(candidate(n))`)
                              was refused. Nothing of the iterator's own type crosses: the far side
                              gets a built-in list iterator, equal only to itself, as a generator is.
  Fraction                 -> {"$fraction": [numerator, denominator]}
  Decimal                  -> {"$decimal": its string} (the exponent kept: Decimal("2.50") stays 2.50)
  deque                    -> {"$deque": [[...], maxlen]}
                              Round 11: `return Fraction(1, 3)` was refused. Only the numbers
                              and items cross; the far side builds its own value of the type.
  a standard container or enum member (Counter, OrderedDict, defaultdict, a namedtuple, an
  IntEnum member)          -> its plain built-in value (round 10: `return Counter(s)` was refused).
                              Copied with the built-in type's own method, so no method of the
                              subclass runs; other subclasses (`class I(int)`) are still refused.
"""

from __future__ import annotations

import base64
import decimal
import enum
import fractions
import functools
import math
from collections import deque
from typing import Any

# Decimal ints beyond this many digits trip CPython's int/str conversion guard (4300).
_MAX_DECIMAL_DIGITS = 4000
# Counted in JSON levels of the encoding (a dict is three: {"$dict": [[k, v]]}), so that
# any encodable value fits in a frame's nesting limit with room for the envelope.
MAX_DEPTH = 200
# An endless generator (itertools.count()) is refused after this many items rather than drained forever.
MAX_ITER_ITEMS = 1_000_000

_KEYS, _VALUES, _ITEMS = type({}.keys()), type({}.values()), type({}.items())
# Taken when this module loads, before any candidate code runs in the process: code that
# swaps `fractions.Fraction` for a rigged subclass does not change what is exact here.
_FRACTION, _DECIMAL, _DEQUE = fractions.Fraction, decimal.Decimal, deque
# Longer decimal strings are refused both ways (a guard like the int one above).
_MAX_DECIMAL_CHARS = 4096


class Unencodable(TypeError):
    """A value of a type that cannot cross the boundary as plain data."""


def _drained(obj: Any) -> list[Any]:
    items = []
    for item in obj:
        if len(items) >= MAX_ITER_ITEMS:
            raise Unencodable(f"iterator longer than {MAX_ITER_ITEMS} items")
        items.append(item)
    return items


def _is_iterator(obj: Any) -> bool:
    return hasattr(type(obj), "__next__") and hasattr(type(obj), "__iter__")


# Each built-in base with a copy that returns the exact built-in type whatever the subclass overrides.
_PLAIN_COPIES: tuple[tuple[type, Any], ...] = (
    (int, int.__int__), (float, float.__float__), (str, lambda text: str.__getitem__(text, slice(None))),
    (dict, dict.copy), (list, list.copy), (tuple, lambda items: tuple.__getitem__(items, slice(None))),
    (set, set.copy), (frozenset, frozenset.copy),
)


_NOT_STANDARD = object()


def _standard_plain(obj: Any) -> Any:
    """The plain value of a standard-library subclass of a built-in type (`collections`' Counter,
    OrderedDict, defaultdict, a namedtuple, an enum member), else `_NOT_STANDARD`: the ways honest
    code returns a dict, tuple or int, equal to the plain value in Python. Only data crosses."""
    kind = type(obj)
    if not (kind.__module__ == "collections" or issubclass(kind, enum.Enum)
            or (issubclass(kind, tuple) and hasattr(kind, "_fields"))):
        return _NOT_STANDARD
    for base, plain in _PLAIN_COPIES:
        if isinstance(obj, base):
            return plain(obj)
    return _NOT_STANDARD


def _numpy_scalar(obj: Any) -> Any:
    # NumPy scalars are common in honest solutions; `.item()` yields the built-in value.
    kind = type(obj)
    if kind.__module__ == "numpy" and hasattr(obj, "item"):
        value = obj.item()
        if type(value) in (int, float, bool, complex, str, bytes):
            return value
    raise Unencodable(f"values of type {kind.__qualname__} cannot be passed as plain data")


def encode(obj: Any, depth: int = 0, *, iterators: bool = True) -> Any:
    """`iterators=False` refuses iterators instead of draining them: a module's data is exported
    that way, so a generator the module keeps (an endless prime generator) is never consumed."""
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    kind = type(obj)
    if obj is None or kind is bool or kind is str:
        return obj
    if kind is int:
        if obj.bit_length() > _MAX_DECIMAL_DIGITS * 3:
            return {"$int": hex(obj)}
        return obj
    if kind is float:
        if math.isfinite(obj):
            return obj
        return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    nxt = depth + 1
    # A partial adds no Python frame per level (a closure would, and a value near the depth limit
    # would then end in a RecursionError instead of Unencodable).
    inner = functools.partial(encode, iterators=iterators)
    if kind is list:
        return [inner(item, nxt) for item in obj]
    if kind is tuple:
        return {"$tuple": [inner(item, nxt + 1) for item in obj]}
    if kind is set:
        return {"$set": [inner(item, nxt + 1) for item in obj]}
    if kind is frozenset:
        return {"$frozenset": [inner(item, nxt + 1) for item in obj]}
    if kind is dict:
        return {"$dict": [[inner(k, nxt + 2), inner(v, nxt + 2)] for k, v in obj.items()]}
    if kind is bytes:
        return {"$bytes": base64.b64encode(obj).decode()}
    if kind is bytearray:
        return {"$bytearray": base64.b64encode(bytes(obj)).decode()}
    if kind is complex:
        return {"$complex": [inner(obj.real, nxt), inner(obj.imag, nxt)]}
    if kind is range:
        return {"$range": [obj.start, obj.stop, obj.step]}
    if kind is _KEYS or kind is _VALUES:
        return {"$keys" if kind is _KEYS else "$values": [inner(item, nxt + 1) for item in obj]}
    if kind is _ITEMS:
        return {"$items": [[inner(k, nxt + 2), inner(v, nxt + 2)] for k, v in obj]}
    if kind is _FRACTION:
        return {"$fraction": [inner(obj.numerator, nxt + 1), inner(obj.denominator, nxt + 1)]}
    if kind is _DECIMAL:
        text = _DECIMAL.__str__(obj)
        if len(text) > _MAX_DECIMAL_CHARS:
            raise Unencodable(f"Decimal longer than {_MAX_DECIMAL_CHARS} characters")
        return {"$decimal": text}
    if kind is _DEQUE:
        return {"$deque": [[inner(item, nxt + 2) for item in obj], obj.maxlen]}
    plain = _standard_plain(obj)
    if plain is not _NOT_STANDARD:
        return inner(plain, depth)
    if iterators and _is_iterator(obj):
        return {"$iter": [inner(item, nxt + 1) for item in _drained(obj)]}
    return inner(_numpy_scalar(obj), nxt)


def _decode_float(text: Any) -> float:
    if text not in ("nan", "inf", "-inf"):
        raise ValueError(f"bad float tag {text!r}")
    return float(text)


def _decode_int(text: Any) -> int:
    if not isinstance(text, str):
        raise ValueError("bad int tag")
    return int(text, 16)


def decode(data: Any, depth: int = 0) -> Any:
    """Build built-in values from encoded data; raises ValueError on anything malformed."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    nxt = depth + 1
    if kind is list:
        return [decode(item, nxt) for item in data]
    if kind is not dict or len(data) != 1:
        raise ValueError("malformed encoded value")
    ((tag, body),) = data.items()
    if tag == "$int":
        return _decode_int(body)
    if tag == "$float":
        return _decode_float(body)
    if tag == "$bytes":
        return base64.b64decode(body, validate=True)
    if tag == "$bytearray":
        return bytearray(base64.b64decode(body, validate=True))
    if tag == "$decimal":
        return _decode_decimal(body)
    if type(body) is not list:
        raise ValueError(f"malformed {tag} value")
    if tag == "$tuple":
        return tuple(decode(item, nxt) for item in body)
    if tag == "$set":
        return {decode(item, nxt) for item in body}
    if tag == "$frozenset":
        return frozenset(decode(item, nxt) for item in body)
    if tag == "$dict":
        return _decode_dict(body, nxt)
    if tag == "$complex":
        if len(body) != 2:
            raise ValueError("malformed complex value")
        real, imag = (decode(part, nxt) for part in body)
        if type(real) is not float or type(imag) is not float:
            raise ValueError("malformed complex value")
        return complex(real, imag)
    if tag == "$range":
        if len(body) != 3 or any(type(part) is not int for part in body) or body[2] == 0:
            raise ValueError("malformed range value")
        return range(*body)
    if tag == "$fraction":
        return _decode_fraction(body, nxt)
    if tag == "$deque":
        return _decode_deque(body, nxt)
    if tag == "$iter":
        return iter([decode(item, nxt) for item in body])
    if tag == "$values":
        return dict(enumerate(decode(item, nxt) for item in body)).values()
    try:
        if tag == "$keys":
            return dict.fromkeys(decode(item, nxt) for item in body).keys()
        if tag == "$items":
            return _decode_dict(body, nxt).items()
    except TypeError as exc:  # an unhashable key
        raise ValueError(f"malformed {tag} value") from exc
    raise ValueError(f"unknown tag {tag!r}")


def _decode_dict(body: list[Any], depth: int) -> dict[Any, Any]:
    out = {}
    for pair in body:
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("malformed dict entry")
        out[decode(pair[0], depth)] = decode(pair[1], depth)
    return out


def _decode_fraction(body: list[Any], depth: int) -> fractions.Fraction:
    if len(body) != 2:
        raise ValueError("malformed fraction value")
    numerator, denominator = (decode(part, depth) for part in body)
    if type(numerator) is not int or type(denominator) is not int or denominator == 0:
        raise ValueError("malformed fraction value")
    return _FRACTION(numerator, denominator)


def _decode_decimal(text: Any) -> decimal.Decimal:
    if type(text) is not str or len(text) > _MAX_DECIMAL_CHARS:
        raise ValueError("malformed decimal value")
    try:
        value = _DECIMAL(text)
    except decimal.InvalidOperation as exc:
        raise ValueError("malformed decimal value") from exc
    if value.is_snan():  # raises on every comparison and hash: never an answer
        raise ValueError("signalling NaN decimal value")
    return value


def _decode_deque(body: list[Any], depth: int) -> deque[Any]:
    if len(body) != 2 or type(body[0]) is not list:
        raise ValueError("malformed deque value")
    maxlen = body[1]
    if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
        raise ValueError("malformed deque value")
    return _DEQUE((decode(item, depth + 1) for item in body[0]), maxlen)
