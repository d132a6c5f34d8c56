"""Shared by the proof verifier's tests and benchmark: set.mm read once with its proofs,
Debian's `metamath` as the reference checker, and mutations of compressed proofs."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from verifiers.proof.inside.database import Database, parse

SET_MM = Path("/usr/share/metamath/databases/set.mm")
METAMATH = shutil.which("metamath")
ERROR_LABEL_RE = re.compile(r'^\?(?:Error|Warning).*?label "([^"]+)"', re.M)


@functools.lru_cache(maxsize=1)
def set_mm() -> Database:
    """set.mm with its proofs, parsed once per test session."""
    return parse(SET_MM.read_text(encoding="ascii"), keep_proofs=True)


@functools.lru_cache(maxsize=1)
def set_mm_text() -> str:
    return SET_MM.read_text(encoding="ascii")


def metamath_verdicts(database: Path, labels: list[str], timeout_s: float = 600) -> dict[str, bool]:
    """Debian's metamath on `database`: whether each label's proof verifies (one run)."""
    assert METAMATH, "Debian's metamath is not installed (scripts/install.sh test)"
    # A short relative name and a wide screen: metamath wraps its messages at 79 columns.
    commands = ["set width 9999", f'read "{database.name}"'] + [f"verify proof {label}" for label in labels] + ["exit"]
    out = subprocess.run([METAMATH, *commands], capture_output=True, text=True, timeout=timeout_s,
                         cwd=database.parent).stdout
    failed = set(ERROR_LABEL_RE.findall(out))
    for label in labels:  # every label must at least have been looked at
        assert re.search(rf"^(?:MM> verify proof )?{re.escape(label)}\b", out, re.M) or label in failed, out[-3000:]
    return {label: label not in failed for label in labels}


def with_copies(text: str, copies: dict[str, list[tuple[str, str]]], db: Database) -> str:
    """set.mm with each (new label, proof) inserted as a $p right after its theorem, in the same
    scope: the copy has the theorem's frame and may cite what the theorem may, and the theorem."""
    inserts: list[tuple[int, str]] = []
    for label, variants in copies.items():
        found = re.search(rf"(?:^|\s){re.escape(label)}\s+\$p\s", text)
        assert found, label
        end = text.index("$.", text.index("$=", found.end())) + 2
        statement = " ".join(db.assertions[label].expr)
        body = "".join(f"\n {new} $p {statement} $= {proof} $.\n" for new, proof in variants)
        inserts.append((end, body))
    out, last = [], 0
    for position, body in sorted(inserts):
        out += [text[last:position], body]
        last = position
    out.append(text[last:])
    return "".join(out)


def split_compressed(proof: str) -> tuple[list[str], list[str]]:
    """(labels, step chunks): each chunk is one step number (U-Y digits then A-T), a `Z` or a `?`."""
    tokens = proof.split()
    close = tokens.index(")")
    letters = "".join(tokens[close + 1:])
    chunks, current = [], ""
    for ch in letters:
        current += ch
        if ch in "Z?" or "A" <= ch <= "T":
            chunks.append(current)
            current = ""
    return tokens[1:close], chunks


def join_compressed(labels: list[str], chunks: list[str]) -> str:
    return "( " + " ".join(labels) + " ) " + "".join(chunks)


def encode_number(n: int) -> str:
    """A compressed-proof step number (appendix B of the Metamath book)."""
    out = chr(ord("A") + (n - 1) % 20)
    n = (n - 1) // 20
    while n:
        out = chr(ord("U") + (n - 1) % 5) + out
        n = (n - 1) // 5
    return out
