"""Task certification for Metamath proofs: the database's own proof of the theorem (or a
supplied proof of a new statement) must be accepted; an empty proof, an unknown step and
the reference cut short must not."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from verifiers.base import Probe, TaskBase

SHIPPED_DIR = Path("/usr/share/metamath/databases")


@functools.lru_cache(maxsize=2)
def _database_text(path: str, mtime: float) -> str:
    return Path(path).read_text(encoding="ascii", errors="replace")


def own_proof(task: TaskBase) -> str | None:
    """The proof the database itself gives for the task's theorem (trusted text, read on the host)."""
    label = task.theorem  # type: ignore[attr-defined]
    if label is None:
        return None
    text = task.database_text  # type: ignore[attr-defined]
    if text is None:
        path = SHIPPED_DIR / task.database  # type: ignore[attr-defined]
        if not path.is_file():
            return None
        text = _database_text(str(path), path.stat().st_mtime)
    match = re.search(rf"(?:^|\s){re.escape(label)}\s+\$p\s.*?\$=(.*?)\$\.", text, re.S)
    return " ".join(match.group(1).split()) if match else None


def fenced(proof: str) -> str:
    return f"```metamath\n{proof}\n```"


def reference(task: TaskBase, supplied: str | None) -> str | None:
    if supplied is not None:
        return supplied
    proof = own_proof(task)
    return fenced(proof) if proof else None


def probes(task: TaskBase, reference_proof: str | None) -> list[Probe]:
    out = [Probe("empty_proof", fenced("")), Probe("unknown_step", fenced("?"))]
    proof = own_proof(task)
    if proof:
        steps = proof.split()
        if steps and steps[0] == "(":  # compressed: drop the last letter group
            close = steps.index(")") if ")" in steps else len(steps) - 1
            letters = "".join(steps[close + 1:])
            cut = " ".join(steps[:close + 1]) + " " + letters[:len(letters) // 2]
            out.append(Probe("incomplete_proof", fenced(cut)))
        elif len(steps) > 1:
            out.append(Probe("incomplete_proof", fenced(" ".join(steps[:-1]))))
    return out
