"""How a record's parts are shown: the extracted answer inside the response, hidden task fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Evidence keys under which verifiers report what they took from the response, in order of preference.
EXTRACTED_KEYS = ("extracted", "extracted_answer", "answer", "code", "sql", "query", "final_message")


@dataclass(frozen=True)
class Highlighted:
    before: str
    match: str
    after: str
    key: str


def highlight(response: str | None, evidence: dict[str, Any]) -> Highlighted | None:
    """Split the response around the last place where the extracted answer occurs, if it does."""
    if not response:
        return None
    for key in EXTRACTED_KEYS:
        value = evidence.get(key)
        if isinstance(value, str) and value.strip():
            at = response.rfind(value)
            if at >= 0:
                return Highlighted(response[:at], value, response[at + len(value):], key)
    return None


def is_hidden(value: Any) -> bool:
    """Hidden task fields are stored in the public view as {"sha256": ...} only."""
    return isinstance(value, dict) and set(value) == {"sha256"}


def flag_evidence(flags: list[Any], evidence: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each flag with what the verifier wrote about it (flag entries may be names or {name, evidence})."""
    by_name = evidence.get("flags") if isinstance(evidence.get("flags"), dict) else {}
    out = []
    for flag in flags:
        if isinstance(flag, dict):
            out.append((str(flag.get("name", "?")), flag.get("evidence")))
        else:
            out.append((str(flag), by_name.get(flag) if by_name else evidence.get(flag)))
    return out
