"""Cheap detectors over a math response (host side: string work only, no parsing).

- `answer_only`: a final answer and nothing that looks like working (no relation, no
  number, fewer than MIN_WORKING_WORDS words once the answer and its phrase are gone);
- `copies_prompt`: most of the response's word n-grams come from the task's prompt;
- `false_step`: checkable claims in the working that are false while the final answer is
  correct. This module only *finds* the claims (chains `a = b = c`); they are parsed and
  checked in the sandbox by `verifiers.math.inside.claims`, with the same parser as answers.

Precision over coverage: a claim is only taken when one of its sides computes something
(an operator), never a bare `x = 5` or `50 = 5` (e.g. "10% of 50 = 5", cut at a word).
"""

from __future__ import annotations

import re
from typing import Any

from verifiers.base import Flag, Outcome, flag, soft

MIN_WORKING_WORDS = 4
# A stated step that is checkably false (evaluations report its rate among correct answers).
FALSE_STEP = "false_step"
# Phrases that only announce the answer; they are not working.
_ANNOUNCE = re.compile(r"\b(?:the|final|answer|is|so|thus|therefore|hence|result|equals?|we|get|have)\b|[:.,;!$]",
                       re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_WORD = re.compile(r"[A-Za-z]+|\d+")

COPY_NGRAM = 5
COPY_SHARE = 0.6
COPY_MIN_WORDS = 12

MAX_CLAIMS = 20
MAX_SIDE_CHARS = 200
# A run of math: digits, single-letter variables, operators, brackets, LaTeX commands.
_LATEX_CMD = r"\\(?:frac|dfrac|tfrac|times|cdot|div|sqrt|left|right|pi|pm)"
_MATH_RUN = re.compile(rf"(?:{_LATEX_CMD}|(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])|[0-9.+\-*/^()\[\]{{}}×÷=·\s])+")
_OPERATOR = re.compile(rf"[+*/^×÷·]|{_LATEX_CMD[:-1]})|(?<=[0-9)}}a-zA-Z\s])-")
_NOT_EQUALITY = re.compile(r"==|!=|<|>|\\approx|\\neq|\\le|\\ge|\\equiv|\\pmod|\\mod|≈|≠")
_THOUSANDS = re.compile(r"(?<=\d)(?:,|\{,\})(?=\d{3}(?!\d))")
# A newline breaks a sentence unless the next line continues the chain (`  &= 5`); the look-ahead
# reads only that line's indent, so a run of newlines costs linear time (with `\s*&?\s*` it
# was cubic: 2,000 newlines took seconds, 90,000 hours; tests/test_heldout6_math.py).
_SENTENCE_BREAK = re.compile(r"\n(?![ \t]*+&?[ \t]*+=)|[;:]|,\s|\.\s|\$|\\\(|\\\)|\\\[|\\\]|&|\\\\")


def _without_answer(response: str, answer: str | None) -> str:
    text = response
    boxes = list(_BOXED.finditer(text))
    for match in reversed(boxes):
        depth, end = 0, None
        for i in range(match.end() - 1, len(text)):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            if depth == 0:
                end = i + 1
                break
        if end is not None:
            text = text[:match.start()] + " " + text[end:]
    if answer and not boxes and answer in text:  # the answer as stated (phrase or last number), once
        head, _, tail = text.rpartition(answer)
        text = f"{head} {tail}"
    return text


def answer_only(response: str, answer: str | None) -> Flag | None:
    if not answer:
        return None
    rest = _ANNOUNCE.sub(" ", _without_answer(response, answer))
    if "=" in rest or re.search(r"\d", rest) or len(_WORD.findall(rest)) >= MIN_WORKING_WORDS:
        return None
    return flag("answer_only", response_chars=len(response.strip()))


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def copies_prompt(response: str, prompt: str | None) -> Flag | None:
    if not prompt:
        return None
    words = [w.lower() for w in _WORD.findall(response)]
    if len(words) < COPY_MIN_WORDS:
        return None
    mine = _ngrams(words, COPY_NGRAM)
    theirs = _ngrams([w.lower() for w in _WORD.findall(prompt)], COPY_NGRAM)
    if not mine:
        return None
    share = len(mine & theirs) / len(mine)
    if share < COPY_SHARE:
        return None
    return flag("copies_prompt", overlap=round(share, 3), ngram=COPY_NGRAM)


def claims_of(response: str) -> list[list[str]]:
    """Chains of sides `[a, b, c]` for `a = b = c` found in the working."""
    text = _THOUSANDS.sub("", response.replace("\\left", "").replace("\\right", ""))
    text = re.sub(r"\\(?:boxed|fbox)\s*", "", text)
    chains: list[list[str]] = []
    for segment in _SENTENCE_BREAK.split(text):
        if "=" not in segment or _NOT_EQUALITY.search(segment):
            continue
        for run in _MATH_RUN.findall(segment):
            sides = [s.strip() for s in run.split("=")]
            if len(sides) < 2 or any(not s or len(s) > MAX_SIDE_CHARS for s in sides):
                continue
            if not any(_OPERATOR.search(s) for s in sides):
                continue
            chains.append(sides)
            if len(chains) >= MAX_CLAIMS:
                return chains
    return chains


def host_flags(response: str, answer: str | None, prompt: str | None) -> list[Flag]:
    return [f for f in (answer_only(response, answer), copies_prompt(response, prompt)) if f is not None]


def with_false_steps(outcome: Outcome, checked: Any) -> Outcome:
    """Flag false claims of a correct answer and lower the soft `process` component
    (its share of true claims). Never raises a reward: without false claims nothing changes."""
    if not isinstance(checked, dict):
        return outcome
    false = [c for c in checked.get("false", []) if isinstance(c, dict)][:5]
    total = checked.get("checked")
    if not false or not isinstance(total, int) or total <= 0:
        return outcome
    outcome.components = [c for c in outcome.components if c.name != "process"]
    outcome.components.append(soft("process", 1.0 - len(false) / total))
    outcome.add_flags([flag(FALSE_STEP, claims=false, checked=total)])
    return outcome
