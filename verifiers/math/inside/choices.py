"""Multiple choice: a letter (`C`, `(C)`, `\\textbf{(C)}`), a letter with its value
(`\\textbf{(C)}\\ 12`, `(D) 16`: that choice, never a product), or a value.

Without the task's `choices`, a letter matches a letter and a value a value (a letter written
with its value matches either). With `choices` (letter -> value) both sides are read as
choices: a value is the letter whose value it equals, and a letter written with a value that
is not its own matches nothing."""

from __future__ import annotations

import re

from verifiers.math.inside.answer import Parsed

# "(C)", "(c) 12", "C", "C. 12", "C: 12", "C) 12", "C 12" (a number or a LaTeX value after a space).
CHOICE = re.compile(r"\(\s*([A-Ha-h])\s*\)\s*(.*)|([A-H])(?:\s*[.:)]\s*(.+)|\s+([\d\\\-.].*))?", re.DOTALL)
INCONSISTENT = "!"  # a letter written with a value that is not the letter's own


def choice_parts(s: str) -> tuple[str, str] | None:
    """(letter, value text) of a choice, or None when `s` is not one."""
    m = CHOICE.fullmatch(s.strip())
    if m is None:
        return None
    letter = (m.group(1) or m.group(3)).upper()
    rest = (m.group(2) or m.group(4) or m.group(5) or "").strip()
    return letter, rest


def choice_equal(answer: Parsed, gold: Parsed, equal) -> tuple[bool, str]:  # noqa: ANN001 - compare.equivalent
    """A choice on one side or both (no `choices` map: that is applied before, see `as_choice`)."""
    if answer.kind == gold.kind == "choice":
        if answer.value != gold.value:
            return False, "choice_differs"
        if answer.items and gold.items:
            return equal(answer.items[0], gold.items[0])[0], "choice_and_value"
        return True, "choice"
    choice, other = (answer, gold) if answer.kind == "choice" else (gold, answer)
    if not choice.items:
        return False, "choice_letter_against_value"
    same = equal(choice.items[0], other)[0] if choice is answer else equal(other, choice.items[0])[0]
    return same, "choice_value"


def as_choice(parsed: Parsed, choices: dict[str, Parsed], equal) -> Parsed:  # noqa: ANN001
    """Read one value as a choice of the task's `choices`; what matches none stays as it is."""
    if parsed.kind == "choice":
        letter = str(parsed.value)
        if parsed.items and letter in choices and not equal(parsed.items[0], choices[letter])[0]:
            return Parsed("choice", value=letter + INCONSISTENT)
        return Parsed("choice", value=letter)
    letters = [letter for letter, value in choices.items() if equal(parsed, value)[0]]
    return Parsed("choice", value=letters[0]) if len(letters) == 1 else parsed
