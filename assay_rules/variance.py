"""The one definition of a zero-variance group, shared by the service and the trainer.

A group has zero variance when its counted rewards (errors and masked responses left
out) span at most ZERO_VARIANCE_SPAN: max - min <= 5e-7. Rewards are rounded to
`rewards.REWARD_DECIMALS` (6) decimals, so two different rewards differ by at least 1e-6,
and float32 keeps that difference; equal rewards stay equal after any float noise below
half that resolution. A group with fewer than two counted rewards has zero variance too:
it carries no relative signal. The tensor version in `trainer_client.grpo` uses the same
constant.
"""

from __future__ import annotations

from collections.abc import Iterable

ZERO_VARIANCE_SPAN = 5e-7


def is_zero_variance(rewards: Iterable[float | None]) -> bool:
    counted = [float(r) for r in rewards if r is not None]
    return len(counted) < 2 or max(counted) - min(counted) <= ZERO_VARIANCE_SPAN
