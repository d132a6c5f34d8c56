"""Group-relative advantages, as GRPO uses them: A_i = (r_i - mean) / (std + eps).

The service computes them for every group it scores; the trainer client recomputes them
when it had to split an oversized group over several requests. `trainer_client.grpo`
keeps the batched tensor version of the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from assay_rules.variance import is_zero_variance


@dataclass
class GroupStats:
    advantages: list[float | None]
    mean: float | None
    std: float | None
    zero_variance: bool
    counted: int


def group_advantages(rewards: Sequence[float | None], include: Sequence[bool] | None = None, scale: str = "group",
                     eps: float = 1e-4, bessel: bool = True) -> GroupStats:
    """Advantages over the counted responses: those with a reward (not None) and, when
    `include` is given, included (errors and masked responses are left out).

    `scale="group"` divides by the group's std + eps, `"none"` only centres. std uses
    Bessel's correction by default, as torch.std and TRL do. A response left out gets
    advantage None; a group with nothing counted has zero variance and no mean.
    """
    keep = [r is not None for r in rewards] if include is None else \
        [k and r is not None for r, k in zip(rewards, include, strict=True)]
    counted = [float(r) for r, k in zip(rewards, keep, strict=True) if k]  # type: ignore[arg-type]
    if not counted:
        return GroupStats([None] * len(rewards), None, None, True, 0)
    mean = sum(counted) / len(counted)
    dof = len(counted) - 1 if bessel else len(counted)
    std = math.sqrt(sum((r - mean) ** 2 for r in counted) / dof) if dof > 0 else 0.0
    # eps may be 0 (a caller's choice): then a group whose rewards are all equal has std 0,
    # and every r - mean is exactly 0 too, so its advantages are 0, not a division by zero.
    denom = 1.0 if scale == "none" else (std + eps) or 1.0
    advantages = [(r - mean) / denom if k else None for r, k in zip(rewards, keep, strict=True)]  # type: ignore[operator]
    return GroupStats(advantages, mean, std, is_zero_variance(counted), len(counted))
