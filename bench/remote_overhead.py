"""The `remote` backend (jobs through sandboxd) against the same backend in-process.

    python bench/remote_overhead.py --jobs 50 [--backend process]

Starts `python -m sandboxes.sandboxd` on a unix socket with the chosen backend, and in the
same run measures, in-process and through the runner: the median of `--jobs` trivial
jobs (`python3 -c pass`), of `--jobs` math answers judged (a resident server: one
request per answer over a held connection), and of `--jobs` code verifications of one
honest response (grader and candidate relayed through the caller).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandboxes.base import Job, Limits, Sandbox, SandboxUnavailable
from sandboxes.factory import create_sandbox
from sandboxes.remote import RemoteSandbox
from verifiers.base import VerifyContext
from verifiers.registry import get

REPO = Path(__file__).resolve().parent.parent
TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n"


def median_s(fn, n: int) -> float:
    fn()  # warm
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(box: Sandbox, n: int) -> dict[str, float]:
    job = Job(command=["python3", "-c", "pass"], limits=Limits(wall_s=30))
    math, code, ctx = get("math"), get("code"), VerifyContext(sandbox=box)
    math_task = math.parse_task({"answer": "\\frac{1}{2}"})
    code_task = code.parse_task({"entry_point": "add", "tests": TESTS})
    return {
        "trivial_job": median_s(lambda: box.run(job), n),
        "math_answer": median_s(lambda: math.verify(math_task, "\\boxed{0.5}", ctx), n),
        "code_verify": median_s(lambda: code.verify(code_task, "```python\ndef add(a, b):\n    return a + b\n```",
                                                    ctx), n),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--backend", default="process")
    args = p.parse_args()
    image = os.environ.get("ASSAY_SANDBOX_IMAGE", "assay-runtime:latest")
    print(f"load average before: {os.getloadavg()}")
    local = create_sandbox(args.backend, workers=2, image=image)
    try:
        here = measure(local, args.jobs)
    finally:
        local.close()
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp, "secret")
        secret.write_text(secrets.token_hex(32))
        url = f"unix://{tmp}/sandboxd.sock"
        runner = subprocess.Popen([sys.executable, "-m", "sandboxes.sandboxd", "--listen", url, "--secret-file",
                                   str(secret), "--backend", args.backend, "--workers", "2", "--image", image,
                                   "--log-level", "warning"], cwd=REPO)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    remote = RemoteSandbox(url, secret.read_text().encode())
                    break
                except SandboxUnavailable:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            there = measure(remote, args.jobs)
        finally:
            runner.terminate()
            runner.wait(30)
    for name in here:
        print(f"{name:12s} in-process {here[name] * 1000:7.1f} ms   via sandboxd {there[name] * 1000:7.1f} ms   "
              f"ratio {there[name] / here[name]:5.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
