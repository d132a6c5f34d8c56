"""The bootstrap interval of `reward_up_heldout_down` (service/eval_metrics.py) is exactly what the
original per-draw Python loop gives (written out here as the reference): the same seeded draws,
the same sequential sums, the same percentile indices, on paired and unpaired inputs of many
sizes (1, powers of two and their neighbours, where the draws' rejection differs), other seeds and
sample counts, and values that make rounding order matter."""

from __future__ import annotations

import math
import random

import pytest

from service.eval_metrics import bootstrap_difference


def _reference(a: list[float], b: list[float], paired: bool, samples: int, seed: int) -> tuple[float, float] | None:
    if not a or not b or (paired and len(a) != len(b)):
        return None
    rng = random.Random(seed)
    diffs: list[float] = []
    for _ in range(samples):
        if paired:
            idx = [rng.randrange(len(a)) for _ in range(len(a))]
            diffs.append(sum(b[i] - a[i] for i in idx) / len(idx))
        else:
            ia = [rng.randrange(len(a)) for _ in range(len(a))]
            ib = [rng.randrange(len(b)) for _ in range(len(b))]
            diffs.append(sum(b[i] for i in ib) / len(ib) - sum(a[i] for i in ia) / len(ia))
    diffs.sort()
    return diffs[int(0.025 * (samples - 1))], diffs[int(math.ceil(0.975 * (samples - 1)))]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 64, 65, 100, 127, 128, 129, 590, 1024, 1025])
def test_bootstrap_is_the_reference_loop(size: int) -> None:
    rng = random.Random(size)
    for paired in (True, False):
        a = [rng.choice([0.0, 1.0, rng.random(), 1 / 3, 1e-9, 7e5]) for _ in range(size)]
        other = size if paired else max(1, size + rng.choice([-1, 0, 3]))
        b = [rng.choice([0.0, 1.0, rng.random(), 2 / 3, 0.1]) for _ in range(other)]
        for samples, seed in ((1000, 1234), (37, 7), (2, 0)):
            got = bootstrap_difference(a, b, paired, samples, seed)
            assert got == _reference(a, b, paired, samples, seed), (size, paired, samples, seed)


def test_bootstrap_refuses_what_the_reference_refuses() -> None:
    assert bootstrap_difference([], [1.0], False) is None
    assert bootstrap_difference([1.0], [], False) is None
    assert bootstrap_difference([1.0, 0.0], [1.0], True) is None
    assert bootstrap_difference([0.5], [0.25], True) == _reference([0.5], [0.25], True, 1000, 1234)
