"""How a trainer's flat batch becomes GRPO groups: consecutive rows with the same task.

Trainers (TRL, verl, OpenRLHF) repeat each prompt G times in a row, so a run of equal task
references is one group. The service's OpenRLHF endpoint and the trainer adapters both
group this way; this is the one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

Key = TypeVar("Key")  # compared with ==, so dicts (task references) work


def consecutive_runs(keys: Sequence[Key], max_run: int | None = None) -> list[tuple[Key, list[int]]]:
    """Runs of equal consecutive keys, as (key, row indices); a run longer than `max_run`
    is cut into several runs."""
    if max_run is not None and max_run < 1:
        raise ValueError("max_run must be >= 1")
    runs: list[tuple[Key, list[int]]] = []
    for i, key in enumerate(keys):
        if runs and runs[-1][0] == key and (max_run is None or len(runs[-1][1]) < max_run):
            runs[-1][1].append(i)
        else:
            runs.append((key, [i]))
    return runs
