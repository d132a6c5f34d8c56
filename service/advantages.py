"""Group-relative advantages, as GRPO uses them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer_client.variance import is_zero_variance


@dataclass
class GroupStats:
    advantages: list[float | None]
    mean: float | None
    std: float | None
    zero_variance: bool
    counted: int


def group_advantages(rewards: list[float], include: list[bool], scale: str = "group", eps: float = 1e-4,
                     bessel: bool = True) -> GroupStats:
    """A_i = (r_i - mean) / (std + eps) over the included responses (errors excluded).

    std uses Bessel's correction by default, as torch.std and TRL do. Excluded
    responses get advantage None.
    """
    counted = [r for r, keep in zip(rewards, include, strict=True) if keep]
    if not counted:
        return GroupStats([None] * len(rewards), None, None, True, 0)
    mean = sum(counted) / len(counted)
    dof = len(counted) - 1 if bessel else len(counted)
    std = math.sqrt(sum((r - mean) ** 2 for r in counted) / dof) if dof > 0 else 0.0
    zero_variance = is_zero_variance(counted)
    advantages: list[float | None] = []
    for r, keep in zip(rewards, include, strict=True):
        if not keep:
            advantages.append(None)
        elif scale == "none":
            advantages.append(r - mean)
        else:
            advantages.append((r - mean) / (std + eps))
    return GroupStats(advantages, mean, std, zero_variance, len(counted))
