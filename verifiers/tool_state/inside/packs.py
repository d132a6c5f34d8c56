"""The table of domain packs. A new pack is a module with a `PACK` and one line here."""

from __future__ import annotations

from verifiers.tool_state.inside import bank
from verifiers.tool_state.inside.env import DomainPack

PACKS: dict[str, DomainPack] = {p.name: p for p in (bank.PACK,)}


def get_pack(name: str) -> DomainPack:
    try:
        return PACKS[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}; known: {sorted(PACKS)}") from None
