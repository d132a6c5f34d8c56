"""Evaluation metrics over tasks with n sampled responses each (pure functions).

- pass@k: the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), per
  task, averaged over tasks;
- maj@k: the expected accuracy of a majority vote over the extracted answers of k
  responses drawn without replacement from the n (exact over all k-subsets when there
  are few, else a fixed-seed sample of subsets); ties are broken uniformly at random,
  so a tie counts the share of tied answers that are correct; responses without an
  answer abstain;
- bootstrap: percentile intervals of a difference of task means, resampling tasks.
"""

from __future__ import annotations

import itertools
import math
import operator
import random
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

MAJ_EXACT_SUBSETS = 2000
MAJ_SAMPLED_SUBSETS = 2000
BOOTSTRAP_SAMPLES = 1000
SEED = 1234


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k of the n responses (c of them correct) is correct."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k/i): stable for large n.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass(frozen=True)
class Vote:
    answer: str | None  # None abstains (no answer could be extracted)
    correct: bool


def _majority_credit(votes: Sequence[Vote]) -> float:
    tally: dict[str, list[int]] = {}
    for vote in votes:
        if vote.answer is not None:
            entry = tally.setdefault(vote.answer, [0, 0])
            entry[0] += 1
            entry[1] += vote.correct
    if not tally:
        return 0.0
    top = max(count for count, _ in tally.values())
    tied = [(count, right) for count, right in tally.values() if count == top]
    # An answer class is as correct as its members were judged (they normally agree).
    return sum(right / count for count, right in tied) / len(tied)


def maj_at_k(votes: Sequence[Vote], k: int) -> float:
    n = len(votes)
    if not 0 < k <= n:
        raise ValueError(f"maj@k needs 0 < k <= n (k={k}, n={n})")
    if math.comb(n, k) <= MAJ_EXACT_SUBSETS:
        subsets = itertools.combinations(votes, k)
        total = math.comb(n, k)
    else:
        rng = random.Random(SEED)
        subsets = (rng.sample(list(votes), k) for _ in range(MAJ_SAMPLED_SUBSETS))
        total = MAJ_SAMPLED_SUBSETS
    return sum(_majority_credit(subset) for subset in subsets) / total


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def bootstrap_difference(a: Sequence[float], b: Sequence[float], paired: bool,
                         samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """95% percentile interval of mean(b) - mean(a), resampling tasks (pairs when paired).

    Exactly the per-draw loop — `rng.randrange(size)` for each index, each resample summed left
    to right by `sum` (tests/test_bootstrap_exact.py keeps that loop as the reference) — with
    the iteration in C: `_draws` yields randrange's draws from the same generator's words."""
    if not a or not b or (paired and len(a) != len(b)):
        return None
    draw = _draws(random.Random(seed))
    diffs: list[float] = []
    if paired:
        pair = [b[i] - a[i] for i in range(len(a))]
        for _ in range(samples):
            diffs.append(sum(map(pair.__getitem__, draw(len(a)))) / len(a))
    else:
        for _ in range(samples):
            ia, ib = draw(len(a)), draw(len(b))
            diffs.append(sum(map(b.__getitem__, ib)) / len(ib) - sum(map(a.__getitem__, ia)) / len(ia))
    diffs.sort()
    return diffs[int(0.025 * (samples - 1))], diffs[int(math.ceil(0.975 * (samples - 1)))]


WORDS_PER_CALL = 1 << 15


def _draws(rng: random.Random) -> Callable[[int], list[int]]:
    """`draw(size)`: `[rng.randrange(size) for _ in range(size)]`, the same values. CPython's
    randrange(n) (n < 2**32) takes the top n.bit_length() bits of the generator's next 32-bit
    word and draws again while the value is >= n; `getrandbits(32 * m)` yields the next m words
    in order, least significant first. The words flow through one iterator that each draw
    consumes exactly as far as randrange would have."""
    if array("I").itemsize != 4:  # pragma: no cover - every platform Assay runs on
        return lambda size: [rng.randrange(size) for _ in range(size)]

    def chunks() -> Iterator[array]:
        while True:
            words = array("I", rng.getrandbits(32 * WORDS_PER_CALL).to_bytes(4 * WORDS_PER_CALL, "little"))
            if sys.byteorder == "big":  # pragma: no cover
                words.byteswap()
            yield words

    stream = itertools.chain.from_iterable(chunks())

    def draw(size: int) -> list[int]:
        shifted = map(operator.rshift, stream, itertools.repeat(32 - size.bit_length()))
        return list(itertools.islice(filter(size.__gt__, shifted), size))

    return draw
