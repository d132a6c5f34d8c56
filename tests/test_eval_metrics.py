"""pass@k, maj@k, Wilson intervals and the bootstrap against exact enumeration; the one
zero-variance rule, fed the same groups on the service's side and the trainer's."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from assay_rules.variance import is_zero_variance
from service.advantages import group_advantages
from service.eval_metrics import Vote, bootstrap_difference, maj_at_k, pass_at_k
from service.review import wilson_interval
from trainer_client.grpo import compute_advantages
from trainer_client.results import group_stats


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_pass_at_k_equals_exact_enumeration(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            exact = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
    with pytest.raises(ValueError):
        pass_at_k(n, 0, n + 1)


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert pass_at_k(1000, 0, 100) == 0.0 and pass_at_k(1000, 950, 100) == 1.0


def _brute_maj(votes: list[Vote], k: int) -> float:
    total = 0.0
    subsets = list(itertools.combinations(votes, k))
    for subset in subsets:
        counts: dict[str, list[int]] = {}
        for v in subset:
            if v.answer is not None:
                counts.setdefault(v.answer, [0, 0])
                counts[v.answer][0] += 1
                counts[v.answer][1] += v.correct
        if counts:
            top = max(c for c, _ in counts.values())
            tied = [right / c for c, right in counts.values() if c == top]
            total += sum(tied) / len(tied)
    return total / len(subsets)


def test_maj_at_k_equals_exact_enumeration():
    votes = [Vote("1/2", True), Vote("1/2", True), Vote("3", False), Vote("3", False), Vote("3", False),
             Vote(None, False), Vote("7", False)]
    for k in range(1, len(votes) + 1):
        assert maj_at_k(votes, k) == pytest.approx(_brute_maj(votes, k)), k
    assert maj_at_k([Vote("a", True), Vote("b", False)], 2) == 0.5  # a tie is a coin flip
    assert maj_at_k([Vote(None, False)] * 3, 2) == 0.0  # abstentions never win


def test_wilson_interval_known_values():
    low, high = wilson_interval(1, 3)
    assert (low, high) == pytest.approx((0.0615, 0.7923), abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(0, 0) is None


def test_bootstrap_interval_covers_the_difference_and_pairs_tasks():
    a = [0.0, 0.5, 1.0, 0.25] * 5
    b = [x + 0.1 for x in a]
    low, high = bootstrap_difference(a, b, paired=True)
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)  # paired: the same shift every task
    low, high = bootstrap_difference(a, b, paired=False)
    assert low < 0.1 < high
    assert bootstrap_difference([], b, paired=False) is None


GROUPS = [
    [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5000001, 0.5, 0.5],
    [0.333333, 0.333334, 0.333333, 0.333333], [0.25, None, 0.25, 0.25], [1.0, None, None, None],
    [None, None, None, None], [0.7, 0.7 + 1e-9, 0.7 - 1e-9, 0.7], [1.0, 0.999999, 1.0, 1.0],
]


@pytest.mark.parametrize("rewards", GROUPS)
def test_service_and_trainer_agree_on_zero_variance(rewards):
    include = [r is not None for r in rewards]
    service = group_advantages([0.0 if r is None else r for r in rewards], include).zero_variance
    client = group_stats(rewards)[3]
    tensor = compute_advantages(torch.tensor([0.0 if r is None else r for r in rewards]), len(rewards),
                                valid=torch.tensor(include)).zero_variance.item()
    assert service == client == tensor == is_zero_variance(rewards)


def test_zero_variance_rule_sees_the_reward_resolution():
    assert not is_zero_variance([0.333333, 0.333334])  # one step of the service's 6-decimal rounding
    assert is_zero_variance([0.7, 0.7 + 1e-9]) and is_zero_variance([1.0]) and is_zero_variance([])
    assert not math.isclose(0.333333, 0.333334, abs_tol=5e-7)
