"""Checks every request model runs before it builds anything: valid Unicode everywhere
(dict keys included), finite numbers, integers Python will read, and list lengths within the service's limits.

The limits come from `Settings` through a context variable that the ASGI guard
(`service.edge`) sets per request, so a model refuses 110,000 groups before it makes
one of them. Outside a request (task packs, `assay verify`) the defaults apply.
Messages name the field with any unprintable character escaped, so an error can always
be encoded, whatever it echoes.
"""

from __future__ import annotations

import math
import re
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class RequestLimits:
    max_groups: int = 64
    max_group_size: int = 64
    max_eval_tasks: int = 1024
    max_openrlhf_samples: int = 4096


request_limits: ContextVar[RequestLimits | None] = ContextVar("assay_request_limits", default=None)
_DEFAULTS = RequestLimits()


def current_limits() -> RequestLimits:
    """The limits of the request being validated (the defaults outside a request)."""
    return request_limits.get() or _DEFAULTS


def printable(text: str) -> str:
    """`text` with lone surrogates written as `\\udXXX` escapes: always encodable."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# Where a request may carry U+0000: content stored as JSON (tasks, OpenRLHF labels, tool
# arguments) and free text stored in NUL-safe columns (service/nul_text.py: a response, a
# label's note). Anywhere else (ids, names, finish reasons) a NUL is refused: Postgres text
# cannot hold it, and it was a 500/503 for the whole request.
_CONTENT_KEYS = frozenset({"task", "tasks", "labels", "args", "initial_state"})
_TEXT_KEYS = frozenset({"response", "text", "note", "final_message", "reference"})
_TEXT_LISTS = frozenset({"responses", "query", "prompts"})


def _nul_scope(key: Any, child: Any, scope: str) -> str:
    """Where U+0000 may stand under `key`: "content" (anywhere below), "text" (in the string
    itself, or the strings of a list), or "" (nowhere)."""
    if scope == "content" or key in _CONTENT_KEYS:
        return "content"
    if key in _TEXT_KEYS and isinstance(child, str) or key in _TEXT_LISTS and isinstance(child, list):
        return "text"
    return ""


class TooLongInteger:
    """What `parse_long_integers` reads for an integer literal Python will not convert (more
    than `sys.get_int_max_str_digits()` digits): `bad_value` names the field it stands in."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def parse_long_integers(text: str) -> int | TooLongInteger:
    """`json.loads(..., parse_int=parse_long_integers)`: a JSON integer, or a marker for one
    too long to convert (the plain parser raises, and FastAPI answers a 400 naming no field)."""
    digits = len(text.lstrip("-"))
    limit = sys.get_int_max_str_digits()
    return TooLongInteger(digits) if limit and digits > limit else int(text)


def bad_value(value: Any, path: str = "") -> str | None:
    """The first problem in a JSON value, as "where: what", or None: a lone surrogate in a
    string or a key (JSON's `\\ud800` escapes allow them, but they are not Unicode text:
    they cannot be hashed, stored or sent), a NUL outside content and free text (above),
    or a number that is not finite (NaN, 1e400)."""
    stack: list[tuple[str, Any, str]] = [(path, value, "")]
    while stack:
        where, item, scope = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return f"{printable(where) or 'body'}: holds a lone surrogate (\\ud800-\\udfff), which is not " \
                       "valid Unicode text"
            if not scope and "\x00" in item:
                return f"{printable(where) or 'body'}: holds a NUL character (U+0000), which this field may not hold"
        elif isinstance(item, TooLongInteger):
            return f"{printable(where) or 'body'}: an integer of {item.digits} digits (at most " \
                   f"{sys.get_int_max_str_digits()} are read)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{printable(where) or 'body'}: must be a finite number (NaN and infinities are not)"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                inner = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _LONE_SURROGATE.search(key):
                    return f"{printable(inner)}: this key holds a lone surrogate (\\ud800-\\udfff), which is not " \
                           "valid Unicode text"
                if isinstance(key, str) and scope != "content" and "\x00" in key:
                    return f"{printable(inner)}: this key holds a NUL character (U+0000)"
                children.append((inner, child, _nul_scope(key, child, scope)))
            stack += reversed(children)
        elif isinstance(item, list | tuple):
            # In a list of free text, strings are free text and objects ({text, ...}) are judged per key.
            stack += reversed([(f"{where}[{i}]", child, scope if scope == "content" or isinstance(child, str) else "")
                               for i, child in enumerate(item)])
    return None


def check_length(data: Any, field: str, limit: int, where: str = "", setting: str = "") -> None:
    """Refuse a list (or dict) under `field` of a raw request longer than `limit`."""
    if isinstance(data, dict) and isinstance(data.get(field), list | dict) and len(data[field]) > limit:
        name = f"{where}{field}"
        hint = f" ({setting})" if setting else ""
        raise ValueError(f"{name}: {len(data[field])} items; the limit is {limit}{hint}")


def check_groups(groups: Any, where: str, limits: RequestLimits, max_groups: int | None) -> None:
    """A raw list of groups: at most `max_groups` of them (None: the caller bounds them),
    each with at most `max_group_size` responses."""
    if not isinstance(groups, list):
        return  # the model reports the wrong type
    if max_groups is not None and len(groups) > max_groups:
        raise ValueError(f"{where}: {len(groups)} groups; the limit is {max_groups}")
    for i, group in enumerate(groups):
        check_length(group, "responses", limits.max_group_size, f"{where}[{i}].", "max_group_size")


def check_eval(data: Any, limits: RequestLimits) -> None:
    """An evaluation's families: at most `max_eval_tasks` tasks in all, each within the group size."""
    families = data.get("families") if isinstance(data, dict) else None
    if not isinstance(families, dict):
        return
    total = sum(len(tasks) for tasks in families.values() if isinstance(tasks, list))
    if total > limits.max_eval_tasks:
        raise ValueError(f"families: {total} tasks in all; the limit is {limits.max_eval_tasks} (max_eval_tasks)")
    for name, tasks in families.items():
        check_groups(tasks, f"families.{printable(str(name))}", limits, None)
