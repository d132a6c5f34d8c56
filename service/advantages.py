"""Group-relative advantages: the one definition lives in `assay_rules.advantages`."""

from assay_rules.advantages import GroupStats, group_advantages

__all__ = ["GroupStats", "group_advantages"]
