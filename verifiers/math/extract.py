"""Find the final answer in a model response. Pure string work: no parsing, no eval."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)?\s*[:=]?\s*(.+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?")
_INLINE_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# A response that is nothing but a short answer is taken whole.
_SHORT_ANSWER_CHARS = 120


@dataclass(frozen=True)
class Extraction:
    text: str | None
    method: str


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """The balanced {...} group starting at text[start] == '{'."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def last_boxed(text: str) -> str | None:
    found = None
    for match in _BOX.finditer(text):
        end = match.end()
        if end < len(text) and text[end] == "{":
            group = _braced(text, end)
            if group is not None:
                found = group[0]
        else:
            bare = re.match(r"[^\s$]+", text[end:])
            if bare:
                found = bare.group(0)
    return found


def _strip_sentence_end(text: str) -> str:
    text = text.strip()
    # Only the first line of a phrase answer; the explanation after it is not the answer.
    text = text.split("\n", 1)[0].strip()
    return text.rstrip(" .;!")


def extract_answer(response: str, last_number_fallback: bool = True) -> Extraction:
    boxed = last_boxed(response)
    if boxed is not None:
        return Extraction(boxed.strip(), "boxed")
    phrases = list(_ANSWER_PHRASE.finditer(response))
    if phrases:
        candidate = _strip_sentence_end(phrases[-1].group(1))
        if candidate:
            return Extraction(candidate, "answer_phrase")
    stripped = response.strip()
    inline_math = _INLINE_MATH.findall(response)
    short = bool(stripped) and len(stripped) <= _SHORT_ANSWER_CHARS and "\n" not in stripped
    # Prose words (not LaTeX commands) mean a sentence, not an answer.
    prose = re.search(r"[A-Za-z]{3,}", re.sub(r"\\[A-Za-z]+", "", stripped)) is not None
    if short and not prose and not inline_math:
        return Extraction(stripped.rstrip("."), "whole_response")
    if inline_math:
        last = next(group for group in inline_math[-1] if group)
        return Extraction(last.strip(), "last_inline_math")
    if last_number_fallback:
        numbers = _NUMBER.findall(response)
        if numbers:
            return Extraction(numbers[-1], "last_number")
    if short:
        return Extraction(stripped.rstrip("."), "whole_response")
    return Extraction(None, "none")
