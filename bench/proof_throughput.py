"""proof throughput: set.mm proofs checked by the `proof` verifier (warm sandboxed sessions
that already hold set.mm) against running Debian's `metamath` once per proof (read set.mm,
verify the proof), with equal parallelism: as many metamath processes at once as the
sandbox has workers. Both are measured in this run; the ratio is printed.

    python bench/proof_throughput.py [--proofs 400] [--baseline-proofs 16] [--workers 2]

The verifier is called through its Python API (no HTTP, no audit records).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sandboxes.process import ProcessSandbox  # noqa: E402
from service.testing.metamath import SET_MM, set_mm  # noqa: E402
from verifiers import registry  # noqa: E402
from verifiers.base import Verdict, VerifyContext  # noqa: E402


def assay_run(labels: list[str], workers: int) -> tuple[float, list[float]]:
    db = set_mm()
    sandbox = ProcessSandbox(workers=workers)
    verifier = registry.get("proof")
    ctx = VerifyContext(sandbox)
    try:
        sandbox.warm("proof_serve", ("verifiers.proof.serve",))

        def one(label: str) -> float:
            task = verifier.parse_task({"system": "metamath", "database": "set.mm", "theorem": label})
            started = time.perf_counter()
            outcome = verifier.verify(task, f"```metamath\n{db.proofs[label]}\n```", ctx)
            assert outcome.verdict == Verdict.correct, (label, outcome.evidence)
            return time.perf_counter() - started

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, labels[: workers * 4]))  # sessions opened, nothing else
            started = time.perf_counter()
            latencies = list(pool.map(one, labels))
            elapsed = time.perf_counter() - started
        return elapsed, latencies
    finally:
        verifier.close(ctx)
        sandbox.close()


def metamath_run(labels: list[str], workers: int) -> float:
    binary = shutil.which("metamath")
    assert binary, "Debian's metamath is not installed (scripts/install.sh test)"

    def one(label: str) -> None:
        out = subprocess.run([binary, "set width 9999", f'read "{SET_MM.name}"', f"verify proof {label}", "exit"],
                             capture_output=True, text=True, cwd=SET_MM.parent, check=True).stdout
        assert "?Error" not in out, out[-2000:]

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, labels))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proofs", type=int, default=400)
    parser.add_argument("--baseline-proofs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    db = set_mm()
    theorems = [label for label, a in db.assertions.items() if a.kind == "p"]
    labels = random.Random(7).sample(theorems, args.proofs)
    elapsed, latencies = assay_run(labels, args.workers)
    assay_rate = len(labels) / elapsed
    baseline_elapsed = metamath_run(labels[: args.baseline_proofs], args.workers)
    baseline_rate = args.baseline_proofs / baseline_elapsed
    latencies.sort()
    print(f"workers: {args.workers}")
    print(f"assay proof verifier: {len(labels)} proofs in {elapsed:.2f}s = {assay_rate:.1f} proofs/s; "
          f"latency p50 {1000 * statistics.median(latencies):.1f} ms, "
          f"p95 {1000 * latencies[int(0.95 * (len(latencies) - 1))]:.1f} ms")
    print(f"metamath once per proof: {args.baseline_proofs} proofs in {baseline_elapsed:.2f}s = "
          f"{baseline_rate:.2f} proofs/s")
    print(f"ratio (assay / metamath per proof): {assay_rate / baseline_rate:.1f}x")


if __name__ == "__main__":
    main()
