"""Find the final answer(s) in a response or a worked gold solution. Pure string work: no
parsing, no eval, linear-time regular expressions only.

Text inside `<think>...</think>` (and everything before a lone `</think>`, when the prompt
opened the thought) never counts. Then, priority (the first rule that finds something wins):

0. the whole content of the last `<answer>...</answer>` tag (a box or an answer phrase inside
   it still picks the answer out of it);
1. every `\\boxed{...}` / `\\fbox{...}` (all of them: several boxes are several candidates);
2. Minerva's sentence "Final Answer: The final answer is X. I hope it is correct.";
3. an answer phrase or line: "final answer", "the answer is", "answer:", Markdown emphasis
   allowed ("**Answer:** 6", "**Final Answer**: $x=2$"); the last one counts;
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

from verifiers.math.inside.normalise import SCALE_WORDS, SIGN_WORD, unescape

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_MINERVA_START = "final answer is"
_MINERVA_END = "i hope it is correct"
# Markdown emphasis may wrap the phrase or its colon: "**Answer:** 6", "**Final Answer**: $6$", "*Answer*: 6".
# Chinese exams: 故选：B, 答案为 3, 答案是, 应选 C, 所以选 D.
# Possessive quantifiers (`*+`): runs of spaces between the optional parts are never split
# again on a failed match ("answer" and 2,000 newlines took 50 s of host time with `\s*`).
_ANSWER_PHRASE = re.compile(
    r"(?:final\s++answers?+|the\s++answers?+|answers?+|答案\s*+(?:应|应该)?\s*+(?:为|是)?|(?:故|应|所以|因此)\s*+选(?:择)?)"
    r"[*_]*+\s*+(?:is|are|:|=)?\s*+[:=]?[*_]*+\s*+(.+)", re.IGNORECASE)
# The phrase and the first character of its answer: every occurrence on a line is found (the
# phrase's `.+` would swallow a later "the answer is 17" on the line of an earlier "the answer is 18").
_ANSWER_START = re.compile(_ANSWER_PHRASE.pattern.removesuffix("(.+)") + "(.)", re.IGNORECASE)
# "The correct option is C", "the best choice is (B)": an answer phrase too. A pattern of its
# own, tried only when the text has the word (one more alternative in `_ANSWER_START` slowed
# every scan of a long response by half).
_OPTION_START = re.compile(r"(?:correct|right|best)\s++(?:option|choice)[*_]*+\s*+(?:is|:|=)?\s*+[:=]?[*_]*+\s*+(.)",
                           re.IGNORECASE)
_EMPHASIS_EDGES = "*_` "  # Markdown emphasis and code spans
_CHOICE_FIRST = re.compile(r"\(?[A-H]\)\s|\(?[A-H][.:]\s")
_GSM8K = re.compile(r"####\s*([^\n]+)")
_CONNECTOR = re.compile(r"[\s,;.]*(?:(?:and|or|或|和|且)[\s,;.]*)?", re.IGNORECASE)
# A number in prose, with its separators ("1,250.00", "1.234.567", Swiss "1'000'000").
_NUMBER = re.compile(r"(?<![A-Za-z\d.'\u2019])-?\d+(?:[,.]\d+|['\u2019]\d{3}(?!\d))*(?:\s*/\s*\d+)?(?![A-Za-z]*\d)")
_PROSE = re.compile(r"[A-Za-z]{3,}")
# Where a sentence ends: a period after a word (not "i.e." or "e.g."), or after a number when a
# capitalised word follows ("is 12. Next, 5" named 5; a decimal point has no space after it), or a
# line end.
_SENTENCE_END = re.compile(r"(?<=[^\d\s])(?<!\bi\.e)(?<!\be\.g)\.(?:\s|$)|(?<=\d)\.(?=\s+[A-Z])|\n")
_SHORT_ANSWER_CHARS = 120
# An explicit retraction of an answer already given (not "let me double-check", not "on reflection").
_RETRACTION = re.compile(
    r"\b(?:(?:is|was|that's|thats|it's|this\s+is|seems|looks)\s+(?:wrong|incorrect|not\s+(?:right|correct))"
    r"|(?:made|make)\s+(?:a|an)\s+(?:mistake|error)|(?:a|my|an)\s+(?:mistake|error)\b|mistaken"
    r"|correction|correcting|scratch\s+that|I\s+was\s+wrong|let\s+me\s+(?:correct|fix|redo)\b)"
    r"|错了|不对|有误|更正", re.IGNORECASE)
# Words before a number that deny it or only bound it: no value is given.
_BOUND_WORDS = (r"not|never|at\s+(?:least|most)|no\s+(?:more|less|fewer)\s+than|up\s+to"
                r"|(?:less|more|greater|fewer|smaller|larger|bigger)\s+than")
# An answer phrase that opens with a denial or a bound names no value: "the answer is not 24", "is at
# least 24", "is between 20 and 24" (round 15: each answered a gold of 24). One that goes on to a value
# still gives it: "the answer is not 24 but 25".
_NO_VALUE = re.compile(rf"[\s*_$]*(?:{_BOUND_WORDS}|between)\b", re.IGNORECASE)
# Likewise the last number of a text, read as its answer: none when a denial or a bound stands right
# before it ("the total is not 24", "cannot be 24", "lies between 20 and 24").
_DENIED_BEFORE = re.compile(rf"(?:\b(?:{_BOUND_WORDS}|cannot\s+be|can't\s+be|isn't)|\bbetween\s+\S+\s+and)\s*\$?\s*$",
                            re.IGNORECASE)
# Every match of `_RETRACTION` holds one of these (lower case): a test before the regex.
_RETRACTION_WORDS = ("wrong", "incorrect", "not correct", "correcti", "not right", "mistake", "error", "scratch",
                     "let me", "错", "不对", "有误", "更正")
_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK = re.compile(r"<think\s*>.*?(?:</think\s*>|$)", re.IGNORECASE | re.DOTALL)
_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE)
_LONE_TAG = re.compile(r"</?answer\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    candidates: list[str] = field(default_factory=list)
    method: str = "none"

    @property
    def text(self) -> str | None:
        return "; ".join(self.candidates) if self.candidates else None


def _closing_braces(text: str) -> dict[int, int]:
    """Each balanced `{` position -> its `}` position, in one pass (no rescans on hostile text)."""
    closing: dict[int, int] = {}
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            closing[stack.pop()] = i
    return closing


def boxes(text: str) -> list[str]:
    return [content for _, content in _box_spans(text)]


def _box_spans(text: str) -> list[tuple[int, str]]:
    """(start, content) of every box."""
    found = []
    closing: dict[int, int] | None = None
    for match in _BOX.finditer(text):
        end = match.end()
        if end < len(text) and text[end] == "{":
            closing = _closing_braces(text) if closing is None else closing
            if end in closing:
                found.append((match.start(), text[end + 1:closing[end]].strip()))
        else:
            bare = re.match(r"[^\s$]+", text[end:])
            if bare:
                found.append((match.start(), bare.group(0)))
    return [(start, b) for start, b in found if b]


def _cut_in_a_box(text: str, spans: list[tuple[int, str]]) -> bool:
    """Whether a box is opened after the last closed one and never closed: the response was cut
    inside its answer (`the sum is \\boxed{12` may have gone on to 125), so nothing it says is
    its answer."""
    after = spans[-1][0] if spans else -1
    closing: dict[int, int] | None = None
    for match in _BOX.finditer(text, after + 1):
        end = match.end()
        if end < len(text) and text[end] == "{":
            closing = _closing_braces(text) if closing is None else closing
            if end not in closing:
                return True
    return False


def _after_retraction(text: str, spans: list[tuple[int, str]]) -> list[str]:
    """The boxes after the last explicit retraction that follows a box ("that is wrong", "I made
    a mistake", "correction:"), when some box follows it; otherwise all boxes (two answers left
    standing are a hedge)."""
    retractions = [m.start() for m in _RETRACTION.finditer(text, spans[0][0])]
    if retractions:
        later = [content for start, content in spans if start > retractions[-1]]
        if later:
            return later
    return [content for _, content in spans]


def _revised_after_boxes(text: str, spans: list[tuple[int, str]]) -> list[str]:
    """The answer a response states after retracting its last box ("\\boxed{3} Wait, that's not
    right ... the answer is actually 4"): the answer phrase after the last retraction that
    follows every box. Nothing when there is no such retraction or no phrase after it (then
    the boxes stand)."""
    tail = text[_end_of_last_box(text, spans):]
    lower = tail.lower()
    if not any(word in lower for word in _RETRACTION_WORDS):
        return []  # cheap: most answers end with no retraction after their box
    retraction = _last_match(_RETRACTION, tail)
    if retraction is None:
        return []
    tail = tail[retraction.end():]
    start = _last_phrase(tail)
    if start is None or _NO_VALUE.match(tail, start):
        return []  # "an error here: the answer is not -5" denies a value, it does not give one
    return _phrase_answer(tail[start:])


@dataclass(frozen=True)
class MathSpan:
    start: int
    end: int
    content: str
    display: bool


class _NextFinder:
    """Next occurrence of a needle at or after a position, remembered: scanning stays linear."""

    def __init__(self, text: str, needle: str) -> None:
        self.text, self.needle, self.found = text, needle, -2

    def at_or_after(self, pos: int) -> int:
        if self.found == -1 or self.found >= pos:
            return self.found
        self.found = self.text.find(self.needle, pos)
        return self.found


def math_spans(text: str) -> list[MathSpan]:
    """`$$...$$`, `\\[...\\]` (display) and `$...$`, `\\(...\\)` (inline, on one line), in one pass.
    A `\\$` is a dollar sign, not a delimiter."""
    finders = {n: _NextFinder(text, n) for n in ("$$", "\\]", "\\)", "\n", "$", "\\")}
    finders["$close"] = _NextDollarCloser(text, "$")
    spans: list[MathSpan] = []
    i, n = 0, len(text)
    while i < n:
        i = min((p for p in (finders["$"].at_or_after(i), finders["\\"].at_or_after(i)) if p >= 0), default=n)
        if i >= n:
            break
        if text.startswith("\\$", i) or text.startswith("\\\\", i):
            i += 2
            continue
        if text.startswith("$$", i) or text.startswith("\\[", i):
            closer = "$$" if text[i] == "$" else "\\]"
            end = finders[closer].at_or_after(i + 2)
            if end < 0:
                i += 2
                continue
            spans.append(MathSpan(i, end + 2, text[i + 2:end], True))
            i = end + 2
            continue
        if text.startswith("$", i) or text.startswith("\\(", i):
            width = 1 if text[i] == "$" else 2
            end = _inline_close(text, finders, i + width, "$" if width == 1 else "\\)")
            line_end = finders["\n"].at_or_after(i)
            if end < 0 or 0 <= line_end < end:
                i += width
                continue
            spans.append(MathSpan(i, end + width, text[i + width:end], False))
            i = end + width
            continue
        i += 1
    return spans


class _NextDollarCloser(_NextFinder):
    """The next `$` that can close inline math: not escaped (`\\$`), and not a currency sign
    before a number (`9 * $2 = $18`: the second `$` opens an amount, as in pandoc's rule)."""

    def at_or_after(self, pos: int) -> int:
        if self.found == -1 or self.found >= pos:
            return self.found
        end = self.text.find("$", pos)
        while end > 0 and (self.text[end - 1] == "\\" or self.text[end + 1:end + 2].isdigit()):
            end = self.text.find("$", end + 1)
        self.found = end
        return end


def _inline_close(text: str, finders: dict[str, _NextFinder], pos: int, closer: str) -> int:
    return finders["$close" if closer == "$" else closer].at_or_after(pos)


def _last_math_group(text: str) -> list[str]:
    """The last inline math, with the inline maths just before it that only connectors separate."""
    spans = [(m.start, m.end, m.content) for m in math_spans(text) if not m.display]
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
    if tail.startswith(("$$", "\\[")):
        spans = math_spans(tail)
        if spans and spans[0].start == 0 and spans[0].display:
            return [spans[0].content.strip()]
    sentence = _SENTENCE_END.split(tail, maxsplit=1)[0].strip().rstrip(" .;!")
    # Markdown emphasis around the answer ("**6**") is not part of it.
    sentence = sentence.strip(_EMPHASIS_EDGES).rstrip(" .;!")
    bound = _NO_VALUE.match(sentence)
    if bound and ("between" in bound.group(0).lower() or len(_NUMBER.findall(sentence)) <= 1):
        return []
    boxed = boxes(sentence)
    if boxed:
        return boxed
    if _CHOICE_FIRST.match(sentence):  # "C) 45 degrees", "(B) 7 apples": a choice with its value
        return [sentence]
    maths = _last_math_group(sentence)
    if maths and sentence.rstrip(" .\"'\\").endswith(("$", ")")):
        return maths
    words = _PROSE.findall(re.sub(r"\\[A-Za-z]+|\$[^$]*\$", "", sentence))
    if not words or len(sentence) <= 30 and not _NUMBER.search(sentence):
        return [_without_clauses(sentence).rstrip(" ,;(")] if sentence else []
    # A reason or a denial after the value is not the value: "12 because 3 groups of 4", "12 and not 13".
    # An alternative offered after it is a second answer: "12, but it could also be 13" is a hedge.
    alternative = _ALTERNATIVE.search(sentence)
    reason = _REASON.search(sentence)
    ends = [m.start() for m in (alternative, reason) if m is not None]
    numbers = _NUMBER.findall(sentence[:min(ends)]) if ends else []
    numbers = numbers or _NUMBER.findall(sentence)
    if _VALUE_LIST.fullmatch(sentence[:min(ends)] if ends else sentence):
        # "The roots are 2 and -3": several values are one answer, a list (the last alone was read).
        return [(sentence[:min(ends)] if ends else sentence).strip(" ,;(")]
    if numbers:
        offered = next(g for g in alternative.groups() if g) if alternative else None
        return [numbers[-1], offered] if offered and offered != numbers[-1] else [numbers[-1]]
    return maths


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of a pattern whose matches are short (linear in the text)."""
    last = None
    for last in pattern.finditer(text):  # noqa: B007 - the last match is the one wanted
        pass
    return last


def _last_phrase(text: str) -> int | None:
    """Where the answer of the last answer phrase starts."""
    last = _last_match(_ANSWER_START, text)
    lower = text.lower()
    if "option" in lower or "choice" in lower:
        option = _last_match(_OPTION_START, text)
        if option is not None and (last is None or option.start(1) > last.start(1)):
            last = option
    return None if last is None else last.start(1)


# What follows a value and is not it: a reason, a denial, or a qualifier ("4, attained at x = 2",
# "5 for n = 3", "3, I think"; round 16: the qualifier's number was read as the answer). Not a
# restatement ("2 times 6, which is 12"): what follows it is the value (`_RESTATEMENT`).
_REASON = re.compile(
    r"[,;(]?\s*(?:\b(?:because|since|as|not|but|instead|rather|although|though|given|for|when|where|if"
    r"|attained|achieved|obtained|reached|occurring|occurs|i\s+(?:think|believe|guess))\b)",
    re.IGNORECASE)
# A second value offered as possible: "but it could also be 13", "or possibly 13", "though 13 is
# also possible" (not "since x can be 4": an explanation names values too).
_ALTERNATIVE = re.compile(
    r"\b(?:but|or|though|although|alternatively)\b[^.;\d]{0,30}?\b(?:could|might|may)\s+"
    r"(?:also\s+|well\s+|even\s+)?be\s+\$?(" + _NUMBER.pattern + ")"
    r"|\bor\s+(?:possibly|perhaps|maybe|probably)\s+\$?(" + _NUMBER.pattern + ")"
    r"|(" + _NUMBER.pattern + r")\$?\s+(?:is|would\s+be|might\s+be)\s+(?:also\s+|equally\s+)?"
    r"(?:possible|likely|plausible)",
    re.IGNORECASE)
# A restatement of the value: what follows is the value, in its final form ("1/4, i.e. 25%").
_RESTATEMENT = re.compile(r",?\s*+\b(?:i\.e\.?+|that\s+is|which\s+is|which\s+equals)\s*+[,:]?\s*+", re.IGNORECASE)
# A reason that opens an answer, up to its comma: "Since 2x = 6, x = 3".
_OPENING_CLAUSE = re.compile(r"\s*(?:since|because|as|given\s+that)\b[^,]{1,200},\s*", re.IGNORECASE)
# Values joined by "and" or commas: a list ("2 and -3", "1, 2, and 5"); "or" stays a hedge.
_VALUE_LIST = re.compile(r"\s*+\$?(?:" + _NUMBER.pattern + r")\$?(?:\s*+(?:,\s*+(?:and\s++)?|and\s++)\$?(?:"
                         + _NUMBER.pattern + r")\$?)++\s*+[,;(]?")
# Verbs by which a sentence in an answer tag states its value: "is", and the verbs of reaching a
# value ("diverges to +∞", "simplifies to 3", "comes to 12", "approaches 0", "becomes 4"): each
# links the subject to the value as "is" does (round 9).
_COPULA = re.compile(
    r"\b(?:is|are|was|were|equals|be|becomes|approaches|(?:is\s+)?equal\s+to"
    r"|gives|yields|(?:tends|converges|diverges|goes|comes|amounts|evaluates|simplifies|reduces)\s+to)\s+(?=\S)",
    re.IGNORECASE)
_SCALE_WORD = re.compile(rf"\s*({'|'.join(SCALE_WORDS)})\b", re.IGNORECASE)
_DEGREES = re.compile(r"\s*+(?:°|\^\s*+\{?\s*+\\circ|\\circ\b|\\degree\b|degrees?\b)", re.IGNORECASE)
_OR = re.compile(r"\s*+,?\s*+(?:or|或者|或)\s*+(?:\\?\$)?", re.IGNORECASE)  # possessive: linear


# A value offered beside the last box, right after it: "\\boxed{3} (or 4 if the endpoint
# counts)", "$\\boxed{3}$, or possibly 4" (round 16's blind probe: rewarded as 3). Only "or" and
# a number with nothing but spacing, punctuation and `\\text{` between them and the box, so
# "\\boxed{5} for n = 6 or 7" names no second answer, nor "(or approximately 3.14)" for pi.
_OR_RIGHT_AFTER = re.compile(
    r"(?:[\s,;:$(~]|\\q?quad\b|\\[,;:! ]|\\(?:text|mathrm)\s*+\{)*+or\b"
    r"(?:[\s}$~]|\\[,;:! ]|\\(?:text|mathrm)\s*+\{)*+(?:(?:possibly|perhaps|maybe|probably)\b[\s}$~]*+)?"
    r"(" + _NUMBER.pattern + r"(?:\s*+\\?%)?)", re.IGNORECASE)
# How far after the last box its sentence is read for such a value.
_AFTER_BOX_CHARS = 200


def _end_of_last_box(text: str, spans: list[tuple[int, str]]) -> int:
    """Where the text after the last box begins: past its closing brace."""
    start, content = spans[-1]
    return text.find(content, start) + len(content) + 1


def _offered_after_box(text: str, spans: list[tuple[int, str]]) -> list[str]:
    """A value the sentence right after the last box offers as well: "or 4" just after it, or
    "although 4 is also possible", "but it could also be 4" (`_ALTERNATIVE`) anywhere in that
    sentence. Such a value is a second candidate: a hedge unless it agrees with the box."""
    end = _end_of_last_box(text, spans)
    sentence = _SENTENCE_END.split(text[end:end + _AFTER_BOX_CHARS], maxsplit=1)[0]
    offered = _OR_RIGHT_AFTER.match(sentence) or _ALTERNATIVE.search(sentence)
    return [next(group for group in offered.groups() if group)] if offered else []


def _last_numbers(text: str, numbers: list[re.Match[str]]) -> list[str]:
    """The last number, with the numbers just before it joined to it by "or" ("3 or 4",
    "3, or 4"): a hedge in prose stays a hedge (several candidates)."""
    found = [numbers[-1]]
    for number in reversed(numbers[:-1]):
        if _OR.fullmatch(text, number.end(), found[0].start()) is None:
            break
        found.insert(0, number)
    # "It is 12, but it could also be 13": the last number is an alternative offered to the one before.
    offered = _last_match(_ALTERNATIVE, text)  # no number follows the last one, so neither does a later match
    if offered is not None and len(found) == 1:
        group = next(i for i in (1, 2, 3) if offered.group(i))
        before = [n for n in numbers if n.end() <= offered.start(group) and n.end() < found[-1].start()]
        if offered.end(group) == found[-1].end() and before:
            found.insert(0, before[-1])
    scale = _SCALE_WORD.match(text, found[-1].end())  # "about 2.5 million": the word is part of it
    degrees = _DEGREES.match(text, found[-1].end())  # "90°": an angle in degrees, not the number 90
    suffix = f" {scale.group(1)}" if scale else "°" if degrees else ""
    return [m.group(0) for m in found[:-1]] + [found[-1].group(0) + suffix]


def _minerva_sentence(text: str) -> tuple[int, str] | None:
    """Where Minerva's "final answer is X. I hope it is correct." starts, and X (linear: two rfinds)."""
    lower = text.lower()
    end = lower.rfind(_MINERVA_END)
    start = lower.rfind(_MINERVA_START, 0, end) if end >= 0 else -1
    if start < 0:
        return None
    return start, text[start + len(_MINERVA_START):end].strip().rstrip(".").strip()


def _outside_thought(text: str) -> str:
    """The response without its thinking: after the last `</think>`, and no `<think>...</think>` block."""
    closing = list(_THINK_END.finditer(text))
    if closing and "<think" not in text[:closing[-1].start()].lower():
        text = text[closing[-1].end():]  # the prompt opened the thought; the response only closes it
    return _THINK.sub(" ", text)


def _tagged(text: str) -> Extraction | None:
    """The whole content of the last `<answer>...</answer>`; a box or answer phrase inside still picks it out."""
    closing = list(_ANSWER_CLOSE.finditer(text))
    opening = list(_ANSWER_OPEN.finditer(text, 0, closing[-1].start())) if closing else []
    if not opening:
        return None
    content = text[opening[-1].end():closing[-1].start()].strip()
    spans = _box_spans(content)
    if spans:
        return Extraction([box for _, box in spans] + _offered_after_box(content, spans), "answer_tag")
    start = _last_phrase(content)
    if start is None:  # a sentence that states its value: "The number of ways is 7."
        verb = _last_match(_COPULA, content)
        start = verb.end() if verb and re.search(r"[^\W\d_]", content[:verb.start()]) else None
    found = _phrase_answer(content[start:]) if start is not None else None
    if found:
        return Extraction(found, "answer_tag")
    # Markdown emphasis around the whole answer ("**7**") is not part of it.
    content = re.sub(r"^\$+|\$+$", "", _without_clauses(content).strip(_EMPHASIS_EDGES)).strip().rstrip(".").strip()
    return Extraction([content] if content else [], "answer_tag")


def _without_clauses(content: str) -> str:
    """An answer tag's value without a clause that opens or follows it: "Since 2x = 6, x = 3",
    "x = 3 (since 2x = 6)", "3, I think" (round 16: each read as two values or none)."""
    opening = _OPENING_CLAUSE.match(content)
    if opening is not None:
        content = content[opening.end():]
    restated = _last_match(_RESTATEMENT, content)
    if restated is not None and _NUMBER.search(content, 0, restated.start()) and content[restated.end():].strip():
        content = content[restated.end():]
    reason = _REASON.search(content)
    if reason is not None and _NUMBER.search(content, 0, reason.start()):
        content = content[:reason.start()]
    return content


def extract_answer(response: str, last_number_fallback: bool = True, is_gold: bool = False) -> Extraction:
    """A response's answer candidates. A gold (`is_gold`) is never cut by a length limit, so a box
    it leaves open is read as before rather than refused."""
    text = SIGN_WORD.sub("-", unescape(response))
    if "think" in text.lower():
        text = _outside_thought(text)
    if "answer" in text.lower():
        tagged = _tagged(text)
        if tagged is not None:
            return tagged
        # A lone tag is not an answer phrase ("</answer>" must not read as "answer").
        text = _LONE_TAG.sub(" ", text)
    spans = _box_spans(text)
    if not is_gold and ("\\boxed" in text or "\\fbox" in text) and _cut_in_a_box(text, spans):
        return Extraction([], "unclosed_box")
    minerva = _minerva_sentence(text)
    if spans and not (minerva and minerva[0] > text.rfind("\\boxed")):
        revised = _revised_after_boxes(text, spans)
        if revised:
            return Extraction(revised, "answer_phrase_after_retraction")
        standing = _after_retraction(text, spans) if len(spans) > 1 else [spans[0][1]]
        return Extraction(standing + _offered_after_box(text, spans), "boxed")
    if minerva:
        found = _phrase_answer(minerva[1])
        if found:
            return Extraction(found, "final_answer_sentence")
    start = _last_phrase(text)
    if start is not None:
        found = _phrase_answer(text[start:])
        if found:
            return Extraction(found, "answer_phrase")
        if _NO_VALUE.match(text, start):
            return Extraction([], "answer_phrase_without_value")
    gsm8k = list(_GSM8K.finditer(text))
    if gsm8k:
        return Extraction([gsm8k[-1].group(1).strip()], "gsm8k")
    stripped = text.strip()
    display = [span for span in math_spans(text) if span.display]
    if display:
        last = display[-1].content.strip()
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
        numbers = list(_NUMBER.finditer(text))
        if numbers and _DENIED_BEFORE.search(text, max(0, numbers[-1].start() - 40), numbers[-1].start()):
            return Extraction([], "last_number_denied")
        if numbers:
            return Extraction(_last_numbers(text, numbers), "last_number")
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
    found = extract_answer(text, last_number_fallback=True, is_gold=True)
    if found.method == "whole_response":
        return Extraction([text], "as_given")
    return found
