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
    """Hidden task fields are stored in the public view as a keyed {"hmac_sha256": ...} only
    (records written before keyed fingerprints: {"sha256": ...})."""
    return isinstance(value, dict) and set(value) in ({"hmac_sha256"}, {"sha256"})


def flag_evidence(flags: list[str], evidence_by_flag: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """Each flag with what its detector saw (records written before flags had evidence have none)."""
    evidence_by_flag = evidence_by_flag or {}
    return [(str(flag), evidence_by_flag.get(flag)) for flag in flags]
