"""Find the final answer(s) in a response or a worked gold solution. Pure string work: no
parsing, no eval, linear-time regular expressions only.

Priority (the first rule that finds something wins):

1. every `\\boxed{...}` / `\\fbox{...}` (all of them: several boxes are several candidates);
2. Minerva's sentence "Final Answer: The final answer is X. I hope it is correct.";
3. an answer phrase: "final answer", "the answer is", "answer:";
4. GSM8K's `#### X`;
5. the last display math `\\[...\\]` / `$$...$$`;
6. the last inline math `$...$` / `\\(...\\)`, joined with the inline maths before it
   when only connectors ("and", "or", ",") stand between them;
7. a short response that is nothing but an answer, taken whole;
8. optionally, the last number in the text.

Several candidates are returned as they were written; whether they agree (a repeat) or
disagree (a hedge) is decided after parsing, in the sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verifiers.math.normalise import unescape

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_MINERVA = re.compile(r"final answer is\s*(.+?)\s*\.?\s*I hope it is correct", re.IGNORECASE | re.DOTALL)
_ANSWER_PHRASE = re.compile(r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)?\s*[:=]?\s*(.+)", re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]+)")
_DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]", re.DOTALL)
# Inline math does not span lines (a lone `$` is as often a currency sign).
_INLINE_MATH = re.compile(r"(?<![\\$])\$((?:[^$\n\\]|\\[^\n])+?)(?<!\\)\$(?!\$)|\\\(([^\n]+?)\\\)")
_CONNECTOR = re.compile(r"[\s,;.]*(?:(?:and|or)[\s,;.]*)?", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![A-Za-z\d.])-?\d+(?:[,.]\d+)*(?:\s*/\s*\d+)?(?![A-Za-z]*\d)")
_PROSE = re.compile(r"[A-Za-z]{3,}")
_SHORT_ANSWER_CHARS = 120
# Text a gold or response may join boxes with ("\boxed{1} and \boxed{2}").
_BOX_JOIN_CHARS = 40


@dataclass(frozen=True)
class Extraction:
    candidates: list[str] = field(default_factory=list)
    method: str = "none"

    @property
    def text(self) -> str | None:
        return "; ".join(self.candidates) if self.candidates else None


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
                return text[start + 1: i], i + 1
    return None


def boxes(text: str) -> list[str]:
    found = []
    for match in _BOX.finditer(text):
        end = match.end()
        if end < len(text) and text[end] == "{":
            group = _braced(text, end)
            if group is not None:
                found.append(group[0].strip())
        else:
            bare = re.match(r"[^\s$]+", text[end:])
            if bare:
                found.append(bare.group(0))
    return [b for b in found if b]


def _last_math_group(text: str) -> list[str]:
    """The last inline math, with the inline maths just before it that only connectors separate."""
    spans = [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _INLINE_MATH.finditer(text)]
    if not spans:
        return []
    group = [spans[-1]]
    for span in reversed(spans[:-1]):
        between = text[span[1]:group[0][0]]
        if _CONNECTOR.fullmatch(between) is None:
            break
        group.insert(0, span)
    return [g[2].strip() for g in group if g[2].strip()]


def _phrase_answer(tail: str) -> list[str]:
    """What an answer phrase names: its math, else its last number, else its short text."""
    tail = tail.strip()
    display = re.match(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]", tail, re.DOTALL)
    if display:
        return [next(g for g in display.groups() if g is not None).strip()]
    sentence = re.split(r"(?<=[^\d\s])\.(?:\s|$)|\n", tail, maxsplit=1)[0].strip().rstrip(" .;!")
    boxed = boxes(sentence)
    if boxed:
        return boxed
    maths = _last_math_group(sentence)
    if maths and sentence.rstrip(" .\"'\\").endswith(("$", ")")):
        return maths
    words = _PROSE.findall(re.sub(r"\\[A-Za-z]+|\$[^$]*\$", "", sentence))
    if not words or len(sentence) <= 30 and not _NUMBER.search(sentence):
        return [sentence] if sentence else []
    numbers = _NUMBER.findall(sentence)
    if numbers:
        return [numbers[-1]]
    return maths


def extract_answer(response: str, last_number_fallback: bool = True) -> Extraction:
    text = unescape(response)
    boxed = boxes(text)
    minerva = list(_MINERVA.finditer(text))
    last_box = text.rfind("\\boxed")
    if boxed and not (minerva and minerva[-1].start() > last_box):
        return Extraction(boxed, "boxed")
    if minerva:
        found = _phrase_answer(minerva[-1].group(1))
        if found:
            return Extraction(found, "final_answer_sentence")
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        found = _phrase_answer(text[phrases[-1].start(1):])
        if found:
            return Extraction(found, "answer_phrase")
    gsm8k = list(_GSM8K.finditer(text))
    if gsm8k:
        return Extraction([gsm8k[-1].group(1).strip()], "gsm8k")
    stripped = text.strip()
    display = list(_DISPLAY_MATH.finditer(text))
    if display:
        last = next(g for g in display[-1].groups() if g is not None).strip()
        # A display equation that ends in a value: take what follows the last "=".
        if last:
            return Extraction([last], "display_math")
    inline = _last_math_group(text)
    short = bool(stripped) and len(stripped) <= _SHORT_ANSWER_CHARS and "\n" not in stripped
    prose = _PROSE.search(re.sub(r"\\[A-Za-z]+", "", stripped)) is not None
    if short and not prose and (not inline or stripped.startswith("$") and stripped.endswith("$")):
        return Extraction([stripped.rstrip(".")], "whole_response")
    if inline:
        return Extraction(inline, "last_inline_math")
    if last_number_fallback:
        numbers = _NUMBER.findall(text)
        if numbers:
            return Extraction([numbers[-1]], "last_number")
    if short:
        return Extraction([stripped.rstrip(".")], "whole_response")
    return Extraction([], "none")


def extract_gold(gold: str) -> Extraction:
    """A gold is extracted like a response when it is a worked solution; a plain answer is taken whole."""
    text = unescape(gold.strip())
    plain = "\\boxed" not in text and "\\fbox" not in text and "$" not in text and "####" not in text \
        and "\\(" not in text and "\\[" not in text and "answer" not in text.lower()
    if plain:
        return Extraction([text], "as_given")
    found = extract_answer(text, last_number_fallback=True)
    if found.method == "whole_response":
        return Extraction([text], "as_given")
    return found
