"""GRPO advantages and losses, with the definitions and normalisers TRL uses.

Shapes: B completions in groups of G consecutive rows (B = num_groups * G); token tensors
are (B, T) with a completion mask (1 for completion tokens that count, 0 for padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from assay_rules.variance import ZERO_VARIANCE_SPAN

Scale = Literal["group", "batch", "none"]
LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo"]


@dataclass
class Advantages:
    advantages: Tensor  # (B,), 0 for excluded responses
    mean: Tensor  # (num_groups,) group mean over valid responses
    std: Tensor  # (num_groups,) Bessel std over valid responses of the group
    zero_variance: Tensor  # (num_groups,) bool: no relative signal in the group
    valid: Tensor  # (B,) bool: took part in the statistics


def compute_advantages(
    rewards: Tensor,
    group_size: int,
    *,
    valid: Tensor | None = None,
    scale: Scale = "group",
    eps: float = 1e-4,
) -> Advantages:
    """A_i = (r_i - mean_group) / (std + eps), std per group (`group`), over the batch
    (`batch`, TRL's scale_rewards="batch") or no scaling (`none`, Dr. GRPO).

    Responses with valid=False (an `error` verdict) are excluded from their group's mean
    and std and get advantage 0; a group with fewer than two valid responses has std 0.
    """
    rewards = rewards.float()
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.bool()
    r = torch.where(valid, rewards, torch.zeros_like(rewards)).view(-1, group_size)
    v = valid.view(-1, group_size).float()
    n = v.sum(dim=1)
    mean = r.sum(dim=1) / n.clamp(min=1)
    sq = ((r - mean[:, None]) ** 2 * v).sum(dim=1)
    std = torch.where(n > 1, (sq / (n - 1).clamp(min=1)).sqrt(), torch.zeros_like(n))
    centred = (r - mean[:, None]) * v
    if scale == "group":
        adv = centred / (std[:, None] + eps)
    elif scale == "batch":
        flat = rewards[valid]
        batch_std = flat.std() if flat.numel() > 1 else torch.zeros(())
        adv = centred / (batch_std + eps)
    elif scale == "none":
        adv = centred
    else:
        raise ValueError(f"unknown scale {scale!r}")
    big = torch.finfo(r.dtype).max
    span = (torch.where(valid.view(-1, group_size), r, -big).amax(dim=1)
            - torch.where(valid.view(-1, group_size), r, big).amin(dim=1))
    # The one definition (assay_rules.variance): fewer than two counted, or a tiny span.
    zero_variance = (n < 2) | (span <= ZERO_VARIANCE_SPAN)
    return Advantages(adv.reshape(-1), mean, std, zero_variance, valid)


def token_logprobs(logits: Tensor, ids: Tensor) -> Tensor:
    """log p(ids) under logits (B, T, V) -> (B, T), computed in fp32 for stability."""
    return torch.gather(logits.float().log_softmax(dim=-1), -1, ids.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: Tensor) -> Tensor:
    logp = logits.float().log_softmax(dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def completion_mask(ids: Tensor, eos_id: int, *, mask_truncated: bool = False) -> tuple[Tensor, Tensor]:
    """Mask up to and including the first EOS; rows without EOS are truncated.

    With mask_truncated (TRL's mask_truncated_completions) a truncated row is masked out
    entirely, so a completion cut off by the length limit never gets credit or blame.
    Returns (mask (B, T) float, truncated (B,) bool).
    """
    is_eos = ids == eos_id
    has_eos = is_eos.any(dim=1)
    first = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, ids.size(1), dtype=torch.long))
    positions = torch.arange(ids.size(1), device=ids.device)[None, :]
    mask = (positions <= first[:, None]).float()
    truncated = ~has_eos
    if mask_truncated:
        mask = mask * has_eos[:, None].float()
    return mask, truncated


@dataclass(frozen=True)
class LossConfig:
    loss_type: LossType = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None: same as epsilon (DAPO's clip-higher when larger)
    beta: float = 0.0  # KL coefficient; 0 needs no reference model
    max_completion_length: int | None = None  # dr_grpo's constant normaliser


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def grpo_loss(
    logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: LossConfig,
    *,
    old_logps: Tensor | None = None,
    ref_logps: Tensor | None = None,
    num_items_in_batch: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The clipped-surrogate GRPO loss, exactly as TRL's GRPOTrainer computes it.

    old_logps are the log-probs stored at sampling time (num_iterations > 1); None means
    the batch is used once, so the ratio is 1 with the gradient of log p.
    num_items_in_batch is the number of completion tokens in the whole generation batch
    (over gradient-accumulation steps and processes) for `dapo`; default: this mask's.
    """
    mask = mask.float()
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    eps_low = config.epsilon
    eps_high = config.epsilon if config.epsilon_high is None else config.epsilon_high
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    adv = advantages[:, None]
    per_token = -torch.min(ratio * adv, clipped * adv)
    metrics: dict[str, float] = {}
    if config.beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta != 0 needs ref_logps from the frozen reference model")
        # k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1 >= 0.
        delta = ref_logps - logps
        per_token_kl = torch.exp(delta) - delta - 1
        per_token = per_token + config.beta * per_token_kl
        metrics["kl"] = _masked_mean(per_token_kl.detach(), mask).item()

    if config.loss_type == "grpo":
        loss = ((per_token * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)).mean()
    elif config.loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif config.loss_type == "dr_grpo":
        if config.max_completion_length is None:
            raise ValueError("dr_grpo needs max_completion_length")
        loss = (per_token * mask).sum() / (per_token.size(0) * config.max_completion_length)
    elif config.loss_type == "dapo":
        norm = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
        loss = (per_token * mask).sum() / norm.clamp(min=1.0)
    else:
        raise ValueError(f"unknown loss_type {config.loss_type!r}")

    with torch.no_grad():
        low = (ratio < 1 - eps_low) & (adv < 0)
        high = (ratio > 1 + eps_high) & (adv > 0)
        metrics["clip_ratio/low_mean"] = _masked_mean(low.float(), mask).item()
        metrics["clip_ratio/high_mean"] = _masked_mean(high.float(), mask).item()
        metrics["clip_ratio/region_mean"] = _masked_mean((low | high).float(), mask).item()
    return loss, metrics
