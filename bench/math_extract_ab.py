"""Host-side answer extraction, A/B in one process: another checkout's
`verifiers/math/extract.py` (the baseline, e.g. main) against this tree's, alternating, the
minimum of many rounds per response shape, in microseconds per call.

    .venv/bin/python bench/math_extract_ab.py --base /work/main/verifiers/math/extract.py

Both import this tree's `verifiers.math.inside.normalise` (only `unescape`, unchanged).
Run it on a quiet machine if you can; under load, differences below ~30% are noise.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from types import ModuleType

from verifiers.math import extract as mine

CASES = [
    "Let me think. 3 + 4 = 7.\n\nTherefore, the final answer is: $\\boxed{7}$. I hope it is correct.",
    "<think>long reasoning " + "step " * 200 + "</think>\n<answer>42</answer>",
    "We compute the sum and get \\boxed{\\frac{1}{2}}. Check: 1/2 + 1/2 = 1.",
    "First \\boxed{3}. Wait, that's not right. The answer is actually 4.",
    "The answer is 12 apples.",
    "So x = 5 and the angle is 90 degrees.",
    "**Final Answer**\n\\[\\boxed{x^2 - 1}\\]",
    "Step " * 300 + "so we get 17",
    "Reasoning " * 500 + "\\boxed{12}" + " checking " * 200,
]


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("base_extract", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_extract"] = module
    spec.loader.exec_module(module)
    return module


def per_call(module: ModuleType, response: str, n: int = 200) -> float:
    start = time.perf_counter()
    for _ in range(n):
        module.extract_answer(response)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the baseline extract.py")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    base = load(args.base)
    print("base_us  this_us  ratio  response")
    for response in CASES:
        pairs = [(per_call(base, response), per_call(mine, response)) for _ in range(args.rounds)]
        b, m = min(p[0] for p in pairs), min(p[1] for p in pairs)  # alternating: same load for both
        print(f"{b:7.1f}  {m:7.1f}  {m / b:5.2f}  {response[:40]!r}")


if __name__ == "__main__":
    main()
