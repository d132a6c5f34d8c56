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
"""

from __future__ import annotations

import base64
import math
from typing import Any

# Decimal ints beyond this many digits trip CPython's int/str conversion guard (4300).
_MAX_DECIMAL_DIGITS = 4000
# Counted in JSON levels of the encoding (a dict is three: {"$dict": [[k, v]]}), so that
# any encodable value fits in a frame's nesting limit with room for the envelope.
MAX_DEPTH = 200


class Unencodable(TypeError):
    """A value of a type that cannot cross the boundary as plain data."""


def _numpy_scalar(obj: Any) -> Any:
    # NumPy scalars are common in honest solutions; `.item()` yields the built-in value.
    kind = type(obj)
    if kind.__module__ == "numpy" and hasattr(obj, "item"):
        value = obj.item()
        if type(value) in (int, float, bool, complex, str, bytes):
            return value
    raise Unencodable(f"values of type {kind.__qualname__} cannot be passed as plain data")


def encode(obj: Any, depth: int = 0) -> Any:
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
    if kind is list:
        return [encode(item, nxt) for item in obj]
    if kind is tuple:
        return {"$tuple": [encode(item, nxt + 1) for item in obj]}
    if kind is set:
        return {"$set": [encode(item, nxt + 1) for item in obj]}
    if kind is frozenset:
        return {"$frozenset": [encode(item, nxt + 1) for item in obj]}
    if kind is dict:
        return {"$dict": [[encode(k, nxt + 2), encode(v, nxt + 2)] for k, v in obj.items()]}
    if kind is bytes:
        return {"$bytes": base64.b64encode(obj).decode()}
    if kind is bytearray:
        return {"$bytearray": base64.b64encode(bytes(obj)).decode()}
    if kind is complex:
        return {"$complex": [encode(obj.real, nxt), encode(obj.imag, nxt)]}
    return encode(_numpy_scalar(obj), nxt)


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
    if type(body) is not list:
        raise ValueError(f"malformed {tag} value")
    if tag == "$tuple":
        return tuple(decode(item, nxt) for item in body)
    if tag == "$set":
        return {decode(item, nxt) for item in body}
    if tag == "$frozenset":
        return frozenset(decode(item, nxt) for item in body)
    if tag == "$dict":
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("malformed dict entry")
            out[decode(pair[0], nxt)] = decode(pair[1], nxt)
        return out
    if tag == "$complex":
        if len(body) != 2:
            raise ValueError("malformed complex value")
        real, imag = (decode(part, nxt) for part in body)
        if type(real) is not float or type(imag) is not float:
            raise ValueError("malformed complex value")
        return complex(real, imag)
    raise ValueError(f"unknown tag {tag!r}")
