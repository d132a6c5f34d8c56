"""GRPO advantages and losses against values computed by hand (TRL's definitions)."""

from __future__ import annotations

import math

import pytest
import torch

from trainer_client.grpo import (
    LossConfig,
    completion_mask,
    compute_advantages,
    grpo_loss,
)
from trainer_client.results import group_stats


def close(actual, expected, tol=1e-4) -> None:
    assert torch.allclose(torch.as_tensor(actual, dtype=torch.float32),
                          torch.tensor(expected, dtype=torch.float32), atol=tol), (actual, expected)


# ---- advantages ------------------------------------------------------------------------

def test_golden_group_scaling() -> None:
    adv = compute_advantages(torch.tensor([1.0, 0, 0, 0]), 4)
    close(adv.advantages, [1.4997, -0.4999, -0.4999, -0.4999])
    close(adv.mean, [0.25])
    close(adv.std, [0.5])  # Bessel: sqrt((0.75^2 + 3 * 0.25^2) / 3)
    assert not adv.zero_variance.item()


def test_golden_no_scaling() -> None:
    close(compute_advantages(torch.tensor([1.0, 0, 0, 0]), 4, scale="none").advantages, [0.75, -0.25, -0.25, -0.25])


def test_equal_rewards_are_zero_variance() -> None:
    adv = compute_advantages(torch.tensor([1.0, 1, 1, 1, 1, 0, 0, 0]), 4)
    close(adv.advantages[:4], [0, 0, 0, 0])
    assert adv.zero_variance.tolist() == [True, False]


def test_batch_scaling_uses_group_mean_and_batch_std() -> None:
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    # Batch mean 0.375; Bessel std over all 8 = sqrt((3 * 0.625^2 + 5 * 0.375^2) / 7).
    batch_std = math.sqrt((3 * 0.625**2 + 5 * 0.375**2) / 7)
    adv = compute_advantages(rewards, 4, scale="batch")
    expected = [0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5]
    close(adv.advantages, [e / (batch_std + 1e-4) for e in expected])


def test_eps_is_added_to_std() -> None:
    adv = compute_advantages(torch.tensor([1.0, 0]), 2, eps=0.5)
    # std of [1, 0] with Bessel = sqrt(0.5); A = 0.5 / (0.7071 + 0.5)
    close(adv.advantages, [0.5 / (math.sqrt(0.5) + 0.5), -0.5 / (math.sqrt(0.5) + 0.5)])


def test_error_responses_are_excluded_from_statistics() -> None:
    rewards = torch.tensor([1.0, 0, 0, 0.0])
    valid = torch.tensor([True, True, True, False])  # the last one had verdict `error`
    adv = compute_advantages(rewards, 4, valid=valid)
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    close(adv.mean, [1 / 3])
    close(adv.std, [std])
    close(adv.advantages, [(2 / 3) / (std + 1e-4), -(1 / 3) / (std + 1e-4), -(1 / 3) / (std + 1e-4), 0.0])


def test_group_with_one_valid_response_has_no_signal() -> None:
    adv = compute_advantages(torch.tensor([1.0, 0, 0]), 3, valid=torch.tensor([True, False, False]))
    close(adv.advantages, [0, 0, 0])
    assert adv.zero_variance.item()


def test_pure_python_stats_match_torch() -> None:
    rewards = [1.0, 0.0, None, 0.5, 0.25]
    py, mean, std, zero = group_stats(rewards)
    t = compute_advantages(torch.tensor([1.0, 0, 0, 0.5, 0.25]), 5,
                           valid=torch.tensor([True, True, False, True, True]))
    close([0.0 if a is None else a for a in py], t.advantages.tolist())
    assert mean == pytest.approx(t.mean.item()) and std == pytest.approx(t.std.item()) and not zero


def test_rewards_must_split_into_groups() -> None:
    with pytest.raises(ValueError):
        compute_advantages(torch.tensor([1.0, 0, 0]), 2)


# ---- losses ------------------------------------------------------------------------------

MASK = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
ADV = torch.tensor([2.0, -1.0])


def _loss(loss_type: str, **kw):
    logps = torch.zeros(2, 3, requires_grad=True)
    loss, metrics = grpo_loss(logps, ADV, MASK, LossConfig(loss_type=loss_type, max_completion_length=4), **kw)
    loss.backward()
    return loss.item(), logps.grad, metrics


def test_grpo_loss_is_mean_of_per_sequence_means() -> None:
    # ratio 1: per-token loss is -A. Row 0: -2 over 2 tokens; row 1: +1 over 3 tokens.
    loss, grad, _ = _loss("grpo")
    assert loss == pytest.approx((-2 + 1) / 2)
    close(grad, [[-2 / 2 / 2, -2 / 2 / 2, 0], [1 / 3 / 2] * 3])  # d/dlogp of ratio*A is A at ratio 1


def test_bnpo_loss_divides_by_tokens_in_batch() -> None:
    loss, grad, _ = _loss("bnpo")
    assert loss == pytest.approx((-2 * 2 + 1 * 3) / 5)
    close(grad, [[-2 / 5, -2 / 5, 0], [1 / 5] * 3])


def test_dr_grpo_loss_divides_by_batch_times_max_length() -> None:
    loss, _, _ = _loss("dr_grpo")
    assert loss == pytest.approx(-1 / (2 * 4))


def test_dapo_loss_divides_by_tokens_of_the_whole_generation_batch() -> None:
    assert _loss("dapo")[0] == pytest.approx(-1 / 5)
    # Under gradient accumulation TRL divides by the token count of all micro-batches.
    assert _loss("dapo", num_items_in_batch=10)[0] == pytest.approx(-1 / 10)


def test_clipping_with_epsilon_high() -> None:
    old = torch.zeros(1, 4)
    ratios = torch.tensor([[1.5, 0.5, 1.5, 1.1]])
    logps = ratios.log().requires_grad_(True)
    adv = torch.tensor([1.0])
    mask = torch.ones(1, 4)
    loss, m = grpo_loss(logps, adv, mask, LossConfig("bnpo", epsilon=0.2, epsilon_high=0.28), old_logps=old)
    loss.backward()
    # A > 0: -min(r, clip(r, 0.8, 1.28)) -> 1.5 clipped to 1.28, 0.5 stays 0.5, 1.1 stays.
    assert loss.item() == pytest.approx(-(1.28 + 0.5 + 1.28 + 1.1) / 4)
    close(logps.grad, [[0.0, -0.5 / 4, 0.0, -1.1 / 4]])  # clipped tokens carry no gradient
    assert m["clip_ratio/high_mean"] == pytest.approx(0.5)
    assert m["clip_ratio/low_mean"] == 0.0
    assert m["clip_ratio/region_mean"] == pytest.approx(0.5)


def test_clipping_of_negative_advantages() -> None:
    old = torch.zeros(1, 2)
    logps = torch.tensor([[0.5, 1.5]]).log().requires_grad_(True)
    loss, m = grpo_loss(logps, torch.tensor([-1.0]), torch.ones(1, 2), LossConfig("bnpo", epsilon=0.2),
                        old_logps=old)
    loss.backward()
    # A < 0: -min(-r, -clip(r)) = max(r, clip(r)): 0.5 -> 0.8 (clipped), 1.5 -> 1.5 (not clipped).
    assert loss.item() == pytest.approx((0.8 + 1.5) / 2)
    close(logps.grad, [[0.0, 1.5 / 2]])
    assert m["clip_ratio/low_mean"] == pytest.approx(0.5) and m["clip_ratio/high_mean"] == 0.0


def test_k3_kl_penalty() -> None:
    logps = torch.full((1, 2), math.log(0.5), requires_grad=True)
    ref = torch.full((1, 2), math.log(0.25))
    loss, m = grpo_loss(logps, torch.tensor([0.0]), torch.ones(1, 2), LossConfig("bnpo", beta=0.1), ref_logps=ref)
    kl = 0.5 - math.log(0.5) - 1  # exp(d) - d - 1 with d = ref - logp = log(0.5)
    assert m["kl"] == pytest.approx(kl, rel=1e-5)
    assert loss.item() == pytest.approx(0.1 * kl, rel=1e-5)
    with pytest.raises(ValueError):
        grpo_loss(logps, torch.tensor([0.0]), torch.ones(1, 2), LossConfig("bnpo", beta=0.1))


def test_completion_mask_and_truncation() -> None:
    eos = 2
    ids = torch.tensor([[5, 2, 0, 0], [5, 6, 7, 8], [2, 0, 0, 0]])
    mask, truncated = completion_mask(ids, eos)
    close(mask, [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    assert truncated.tolist() == [False, True, False]
    masked, _ = completion_mask(ids, eos, mask_truncated=True)
    close(masked, [[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]])


def test_masked_rows_contribute_nothing() -> None:
    logps = torch.zeros(2, 2, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # the second completion was truncated
    loss, _ = grpo_loss(logps, torch.tensor([1.0, 5.0]), mask, LossConfig("grpo"))
    loss.backward()
    assert loss.item() == pytest.approx(-1 / 2)
    close(logps.grad[1], [0.0, 0.0])


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_match_trl_where_trl_is_installed(scale: str) -> None:
    """TRL turns a None reward into NaN and uses nanmean / nanstd (Bessel): the same numbers."""
    trl_utils = pytest.importorskip("trl.trainer.utils")
    rewards = torch.tensor([1.0, 0.0, 0.5, float("nan"), 0.25, 0.25, 1.0, 0.0])
    g = 4
    mean = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g)
    if scale == "group":
        std = trl_utils.nanstd(rewards.view(-1, g), dim=1).squeeze(-1).repeat_interleave(g)
    else:
        std = trl_utils.nanstd(rewards).expand_as(rewards)
    expected = rewards - mean
    if scale != "none":
        expected = expected / (std + 1e-4)
    valid = ~rewards.isnan()
    ours = compute_advantages(torch.nan_to_num(rewards), g, valid=valid, scale=scale).advantages
    close(ours[valid], expected[valid].tolist())
