"""Clock times and durations: `03:12`, `3:12 pm`, `01:16:05`, `00:30:43.465`, `55 days, 21:48`,
`1 hour 16 minutes`. A time is a time, read as seconds: never a ratio (`01:04` is not `03:12`). Pure string work."""

from __future__ import annotations

import re
from fractions import Fraction

_CLOCK = re.compile(r"(?:(\d+)\s*days?\s*,?\s*)?(\d{1,2}):([0-5]\d)(?::([0-5]\d(?:\.\d+)?))?\s*(?:([ap])\.?\s*m\.?)?",
                    re.IGNORECASE)
_PART = r"(\d+)\s*(?:{})"
_DAYS = _PART.format(r"days?|d")
_HOURS = _PART.format(r"hours?|hrs?|h")
_MINUTES = _PART.format(r"minutes?|mins?|m")
_SECONDS = _PART.format(r"seconds?|secs?|s")
_DURATION = re.compile(
    rf"(?:{_DAYS})?[\s,]*(?:and\s+)?(?:{_HOURS})?[\s,]*(?:and\s+)?(?:{_MINUTES})?[\s,]*(?:and\s+)?(?:{_SECONDS})?",
    re.IGNORECASE)
_UNIT_HINT = re.compile(r"\d\s*(?:\\[a-z]+\s*\{\s*)?[dhms]", re.IGNORECASE)
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textnormal|mbox)\s*\{([^{}]*)\}|\\[,;:!]|~|\\ |\$")


def seconds(text: str) -> Fraction | int | None:
    """The time or duration `text` names, in seconds; None when it is not one."""
    if ":" not in text and not _UNIT_HINT.search(text):  # most answers: no clock, no time words
        return None
    s = " ".join(_WRAPPERS.sub(lambda m: f" {m.group(1) or ''} ", text).split())
    if len(s) > 60:
        return None
    clock = _CLOCK.fullmatch(s)
    if clock:
        days, hours, minutes, half = int(clock[1] or 0), int(clock[2]), int(clock[3]), (clock[5] or "").lower()
        secs = Fraction(clock[4] or 0)
        if half:
            if days or not 1 <= hours <= 12:
                return None
            hours = hours % 12 + (12 if half == "p" else 0)
        return (days * 24 + hours) * 3600 + minutes * 60 + secs
    duration = _DURATION.fullmatch(s)
    if duration is None:
        return None
    parts = [int(p) if p else None for p in duration.groups()]
    if sum(p is not None for p in parts) < 2:  # "3 hours" alone is a quantity with a unit
        return None
    days, hours, minutes, secs = (p or 0 for p in parts)
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs
