"""DAPO-style dynamic sampling: keep only groups that carry a learning signal.

A group whose responses all got the same raw correctness (all solved or all failed)
gives every response advantage 0: it costs a forward and backward pass and teaches
nothing. DAPO (Yu et al., 2025) drops such groups and samples more prompts until the
batch is full. The filter reads the verifier's raw correctness, never a shaped reward:
a length penalty or a soft component must not make a solved-by-all group look
informative. Zero variance is the one rule of `assay_rules.variance`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from assay_rules.variance import is_zero_variance
from trainer_client.results import Group, GroupResult


def raw_correctness(result: GroupResult) -> list[float | None]:
    """Per response: the verifier's correctness; None for errors and masked responses."""
    return [None if r.masked else r.raw_correctness() for r in result.results]


def has_signal(result: GroupResult) -> bool:
    return not is_zero_variance(raw_correctness(result))


@dataclass
class DynamicBatch:
    groups: list[Group] = field(default_factory=list)
    results: list[GroupResult] = field(default_factory=list)
    sampled: int = 0
    dropped: int = 0
    rounds: int = 0


def dynamic_sample(
    sample: Callable[[int], Sequence[Group]],
    score: Callable[[list[Group]], list[GroupResult]],
    batch_size: int,
    *,
    max_rounds: int = 8,
    oversample: float = 1.0,
    max_request: int | None = None,
) -> DynamicBatch:
    """Fill a batch of `batch_size` groups with signal.

    `sample(n)` generates n new groups (prompts and their responses); `score(groups)`
    verifies them (e.g. `RewardClient.score_groups`). Each round asks for the missing
    groups divided by the share kept so far (times `oversample`), so that one round
    usually fills the batch; after `max_rounds` the batch may be short (check `len`).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    batch = DynamicBatch()
    while len(batch.groups) < batch_size and batch.rounds < max_rounds:
        missing = batch_size - len(batch.groups)
        keep_rate = (len(batch.groups) + 1) / (batch.sampled + 1) if batch.sampled else 1.0
        want = max(missing, math.ceil(missing * oversample / max(keep_rate, 1e-3)))
        if max_request is not None:
            want = min(want, max_request)
        groups = list(sample(want))
        batch.rounds += 1
        if not groups:
            break
        results = score(groups)
        batch.sampled += len(groups)
        for group, result in zip(groups, results, strict=True):
            if has_signal(result) and len(batch.groups) < batch_size:
                batch.groups.append(group)
                batch.results.append(result)
            elif not has_signal(result):
                batch.dropped += 1
    return batch
