"""Split a long list of groups into requests the pipeline can take at once."""

from __future__ import annotations

from service.errors import TooBigToFit

__all__ = ["TooBigToFit", "check_fits", "pack"]


def check_fits(groups: list[tuple[str, int]], max_responses: int) -> None:
    """Before any work: every group (where, size) must fit in flight on its own, else no retry could help."""
    for where, size in groups:
        if size > max_responses:
            raise TooBigToFit(f"{where}: {size} responses in one group; at most max_inflight_responses "
                              f"({max_responses}) are verified at once")


def pack(sizes: list[int], max_groups: int, max_responses: int) -> list[list[int]]:
    """Consecutive group indices, at most `max_groups` groups and `max_responses` responses
    per pack. A group larger than `max_responses` goes alone (the pipeline then names the limit)."""
    packs: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index, size in enumerate(sizes):
        if current and (len(current) == max_groups or total + size > max_responses):
            packs.append(current)
            current, total = [], 0
        current.append(index)
        total += size
    if current:
        packs.append(current)
    return packs
