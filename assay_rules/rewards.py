"""Reward rounding: every scalar reward the service returns has REWARD_DECIMALS decimals.

Two different rewards therefore differ by at least 1e-6, which `variance.ZERO_VARIANCE_SPAN`
relies on, and a replayed decision compares equal to the logged one.
"""

from __future__ import annotations

REWARD_DECIMALS = 6


def round_reward(value: float) -> float:
    return round(value, REWARD_DECIMALS)
