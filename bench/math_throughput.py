"""Math scoring throughput: Assay over HTTP (sandboxed, audited) vs math-verify in-process.

    python bench/math_throughput.py [--pairs 2000] [--concurrency 4]

Both score the same (response, gold) pairs in the same run; the ratio is what to read,
since absolute times drift on shared machines.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import LiveServer  # noqa: E402


def make_pairs(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """Golds in common forms; for each gold a GRPO group of 8 responses, equal or not,
    written several ways."""
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        a, b = rng.randint(1, 99), rng.randint(2, 60)
        kind = rng.randrange(8)
        if kind == 0:
            gold, same, other = str(a), [str(a), f"{a}.0"], [str(a + 1), str(-a)]
        elif kind == 1:
            gold = f"\\frac{{{a}}}{{{b}}}"
            same, other = [f"{a}/{b}", f"\\dfrac{{{2 * a}}}{{{2 * b}}}"], [f"{a + 1}/{b}"]
        elif kind == 2:
            gold, same, other = f"{a}\\sqrt{{2}}", [f"\\sqrt{{{2 * a * a}}}", f"{a} \\sqrt 2"], [f"{a}\\sqrt{{3}}"]
        elif kind == 3:
            gold, same, other = f"{a}.{b:02d}", [f"{a}.{b:02d}", f"{a}.{b:02d}0"], [f"{a}.{(b + 1) % 100:02d}"]
        elif kind == 4:
            gold, same, other = f"x^2 + {a}x", [f"x(x+{a})", f"{a}x + x^2"], [f"x^2 - {a}x"]
        elif kind == 5:
            gold, same, other = f"({a}, {b})", [f"({a},{b})", f"\\left({a}, {b}\\right)"], [f"({b}, {a})"]
        elif kind == 6:
            gold, same, other = f"[{a}, {a + b})", [f"[{a},{a + b})"], [f"({a}, {a + b})"]
        else:
            gold, same, other = f"{a}\\pi", [f"{a}\\pi", f"\\pi \\cdot {a}"], [f"{a + 1}\\pi"]
        for _ in range(8):
            answer = rng.choice(same) if rng.random() < 0.5 else rng.choice(other)
            template = rng.choice(["\\boxed{%s}", "Thus the answer is $\\boxed{%s}$.", "Final answer: $%s$",
                                   "We compute step by step.\n\nSo the result is \\boxed{%s}"])
            pairs.append((template % answer, gold))
    return pairs[:n]


def run_assay(pairs: list[tuple[str, str]], concurrency: int) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp))
        try:
            batches = [pairs[i:i + 8] for i in range(0, len(pairs), 8)]

            def send(batch: list[tuple[str, str]]) -> list[float]:
                # One GRPO group: 8 responses to the same task.
                body = {"groups": [{"verifier": "math", "task": {"answer": batch[0][1]},
                                    "responses": [resp for resp, _ in batch]}]}
                with server.client() as c:
                    r = c.post("/v1/groups", json=body)
                    r.raise_for_status()
                    return r.json()["groups"][0]["rewards"]

            with server.client() as c:  # warm the connection path once
                c.get("/readyz")
            started = time.perf_counter()
            with ThreadPoolExecutor(concurrency) as pool:
                rewards = [r for batch in pool.map(send, batches) for r in batch]
            return time.perf_counter() - started, rewards
        finally:
            server.stop()


def run_math_verify(pairs: list[tuple[str, str]]) -> tuple[float, list[float]]:
    from math_verify import parse, verify

    started = time.perf_counter()
    rewards = []
    for response, gold in pairs:
        try:
            ok = verify(parse(f"${gold}$"), parse(response))
        except Exception:
            ok = False
        rewards.append(1.0 if ok else 0.0)
    return time.perf_counter() - started, rewards


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    pairs = make_pairs(args.pairs)
    mv_time, mv_rewards = run_math_verify(pairs)
    assay_time, assay_rewards = run_assay(pairs, args.concurrency)
    print(f"pairs: {len(pairs)}")
    print(f"math-verify in-process: {mv_time:.2f}s  {len(pairs) / mv_time:.0f} pairs/s")
    print(f"assay HTTP (groups of 8, sandboxed, audited): {assay_time:.2f}s  {len(pairs) / assay_time:.0f} pairs/s")
    print(f"throughput ratio assay/math-verify: {mv_time / assay_time:.2f}x")
    print(f"rewarded: assay {sum(assay_rewards):.0f}, math-verify {sum(mv_rewards):.0f}")
    disagreements = [(p, a, m) for p, a, m in zip(pairs, assay_rewards, mv_rewards, strict=True) if a != m]
    print(f"disagreements: {len(disagreements)} ({100 * len(disagreements) / len(pairs):.1f}%)")
    for (response, gold), a, m in disagreements[:12]:
        print(f"  gold={gold!r:28} response={response[-40:]!r:44} assay={a:g} math-verify={m:g}")


if __name__ == "__main__":
    main()
