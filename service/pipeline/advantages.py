"""Stage 5, advantages: each group's rewards become group-relative advantages
(A_i = (r_i - mean) / (std + eps), the rule in service/advantages.py), over the responses
that count (not `error`, not masked). A single verification has no group statistics."""

from __future__ import annotations

from service.advantages import GroupStats, group_advantages
from service.metrics import Metrics
from service.pipeline.resolve import ResolvedGroup
from service.pipeline.score import Scored
from service.pipeline.work import Work
from service.schemas import GroupError


def group_stats(work: Work, groups: list[ResolvedGroup], scored: list[list[Scored] | GroupError],
                metrics: Metrics) -> list[GroupStats | None]:
    if work.advantage is None:
        return [None] * len(scored)
    options = work.advantage
    out: list[GroupStats | None] = []
    for group, decisions in zip(groups, scored, strict=True):
        if isinstance(decisions, GroupError):
            out.append(None)
            continue
        stats = group_advantages([d.reward for d in decisions], [d.counted for d in decisions], options.scale,
                                 options.eps, options.bessel)
        if stats.zero_variance:
            metrics.inc("assay_zero_variance_groups_total", verifier=group.resolved.verifier.name)
        out.append(stats)
    return out
