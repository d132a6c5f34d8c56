"""Whole numbers written in English words ("twenty-one", "one hundred and five")."""

from __future__ import annotations

import re

from verifiers.math.inside.normalise import SCALE_WORDS

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SMALL = {word: n for n, word in enumerate(_UNITS)} | {word: 10 * n for n, word in enumerate(_TENS) if word}
_MAX_WORDS = 12


def number_from_words(text: str) -> int | None:
    words = [w for w in re.split(r"[\s\-]+", text.strip().lower()) if w and w != "and"]
    if not words or len(words) > _MAX_WORDS:
        return None
    sign = 1
    if words[0] in ("minus", "negative"):
        sign, words = -1, words[1:]
    total = current = 0
    seen = False
    for word in words:
        if word in _SMALL:
            current += _SMALL[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in SCALE_WORDS:
            total += max(current, 1) * SCALE_WORDS[word]
            current = 0
        else:
            return None
        seen = True
    return sign * (total + current) if seen else None
