"""gVisor (runsc) against the engine's default runtime (runc) for sandbox containers.

    python bench/gvisor_overhead.py --jobs 20 --image assay-runtime:latest

For each runtime, in the same run: the first job of a fresh sandbox (container start
included) and the median of `--jobs` warm jobs (`python3 -c pass`, and the code verifier
judging one honest response). Prints the ratios runsc / runc. Needs a Docker engine with
a `runsc` runtime registered (docs/operations.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from sandboxes.base import Job, Limits
from sandboxes.docker_backend import DockerSandbox
from verifiers.base import VerifyContext
from verifiers.registry import get

TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
HONEST = "```python\ndef add(a, b):\n    return a + b\n```"


def measure(image: str, runtime: str | None, jobs: int) -> dict[str, float]:
    box = DockerSandbox(image=image, workers=1, runtime=runtime)
    try:
        job = Job(command=["python3", "-c", "pass"], limits=Limits(wall_s=30))
        start = time.perf_counter()
        box.run(job)
        cold = time.perf_counter() - start
        warm = []
        for _ in range(jobs):
            start = time.perf_counter()
            box.run(job)
            warm.append(time.perf_counter() - start)
        code, ctx = get("code"), VerifyContext(sandbox=box)
        task = code.parse_task({"entry_point": "add", "tests": TESTS})
        code.verify(task, HONEST, ctx)  # warm the verifier's pools
        judged = []
        for _ in range(jobs):
            start = time.perf_counter()
            assert code.verify(task, HONEST, ctx).reward(task) == 1.0
            judged.append(time.perf_counter() - start)
        return {"first_job_s": cold, "warm_job_s": statistics.median(warm), "code_verify_s": statistics.median(judged)}
    finally:
        box.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--image", default=os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest"))
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()}")
    runc = measure(args.image, None, args.jobs)
    runsc = measure(args.image, "runsc", args.jobs)
    for name in runc:
        print(f"{name:14s} runc {runc[name] * 1000:8.1f} ms   runsc {runsc[name] * 1000:8.1f} ms   "
              f"ratio {runsc[name] / runc[name]:5.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
