"""Task certification for math: the gold itself must earn the reward; empty answers, the
prompt, constants, a hedge of the gold and a wrong value must earn nothing."""

from __future__ import annotations

import re

from verifiers.base import Probe, TaskBase

CONSTANTS = ("0", "1")
_INTEGER = re.compile(r"-?\d+")


def reference(task: TaskBase) -> str:
    return f"The final answer is $\\boxed{{{task.answer}}}$."  # type: ignore[attr-defined]


def wrong_value(gold: str) -> str:
    """A value different from the gold: the next integer, or the gold plus one."""
    stripped = gold.strip().strip("$").strip()
    if _INTEGER.fullmatch(stripped):
        return str(int(stripped) + 1)
    return f"({stripped})+1"


def probes(task: TaskBase) -> list[Probe]:
    gold: str = task.answer  # type: ignore[attr-defined]
    wrong = wrong_value(gold)
    raw = task.model_dump(mode="json", by_alias=True)
    out = [
        Probe("empty", ""),
        Probe("wrong_value", f"The final answer is $\\boxed{{{wrong}}}$."),
        Probe("hedge", f"It is either $\\boxed{{{gold}}}$ or $\\boxed{{{wrong}}}$."),
    ]
    out += [Probe(f"constant_{c}", f"$\\boxed{{{c}}}$", excused_if_reference_passes={**raw, "answer": c})
            for c in CONSTANTS]
    if task.prompt:
        out.append(Probe("prompt_copied", task.prompt))
    return out
