"""CPU per compiled response, sandboxed against bare, counted by the kernel (a cpuacct cgroup).

    cd TREE && sudo .venv/bin/python /path/to/bench/code_cpu.py [--language c] [--responses 30]

Runs against the code of the current directory (so one copy of this script measures a base and
a branch checkout alike, alternately). Needs root and a cgroup-v1 `cpuacct` hierarchy at
/sys/fs/cgroup/cpuacct: this process joins a child cgroup of its own, and the cgroup's
`cpuacct.usage` counts, in nanoseconds, the CPU of every thread of this process and of every
process it starts (workers, supervisors, jobs, compilers, programs), user and kernel. Unlike
wall time it hardly moves with other work on a shared machine, and unlike /proc's ticks (10 ms)
it needs no long runs.

Per response, alternating (one at a time; a new source each, so both sides compile):
- bare: the bench's bare side (bench/code_languages.py `bare`: the same compile command, then
  each case as a plain subprocess);
- sandbox: the code verifier's own path (`native.compile_and_run`: the compile and the cases in
  one job of a warm `ProcessSandbox` worker), this process's share included (not the HTTP
  server's: bench/code_attribution.py measures that part);
- an empty job (`sandboxes.inside.echo`) on a worker of the same pool kind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))

import code_languages as bench  # noqa: E402, I001

from sandboxes.base import Limits  # noqa: E402
from sandboxes.process import ProcessSandbox  # noqa: E402
from verifiers.code import native, wire  # noqa: E402
from verifiers.code.task import CodeTask  # noqa: E402

CPUACCT = "/sys/fs/cgroup/cpuacct"
ECHO = "sandboxes.inside.echo:echo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="c")
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--responses", type=int, default=30)
    args = parser.parse_args()
    group = os.path.join(CPUACCT, f"assay-code-cpu-{os.getpid()}")
    os.mkdir(group)
    try:
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        measure(args, group)
    finally:
        with open(os.path.join(CPUACCT, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):  # the last processes may still be on their way out
            with contextlib.suppress(OSError):
                os.rmdir(group)
                break
            time.sleep(0.1)


def measure(args: argparse.Namespace, group: str) -> None:
    def used_ms() -> float:
        with open(os.path.join(group, "cpuacct.usage")) as f:
            return int(f.read()) / 1e6

    cases = bench.problem(1, args.cases)
    task = CodeTask.model_validate(bench.task(args.language, cases))
    plan = [(f"case[{i}]", True, case) for i, case in enumerate(task.io_cases or [])]
    sandbox = ProcessSandbox(workers=1)
    rows: dict[str, list[float]] = {"bare": [], "sandbox": [], "empty job": []}
    try:
        sandbox.warm(native.RUN_POOL, wire.NATIVE_PRELOAD)
        sandbox.warm("echo", ("sandboxes.inside.echo",))
        native.compile_and_run(sandbox, task, bench.variant(args.language, "warm"), plan, lambda: None)
        for i in range(args.responses):
            stamp = f"{time.time_ns()} {i}"
            before = used_ms()
            with tempfile.TemporaryDirectory() as work:
                assert bench.bare(args.language, bench.variant(args.language, "bare " + stamp), cases, work=work)
            rows["bare"].append(used_ms() - before)
            before = used_ms()
            _, fresh, runs = native.compile_and_run(sandbox, task, bench.variant(args.language, stamp), plan,
                                                    lambda: None)
            rows["sandbox"].append(used_ms() - before)
            assert fresh and len(runs) == len(plan) and all(run.status == "pass" for run in runs), runs
            before = used_ms()
            sandbox.call(ECHO, {"x": 1}, Limits(), pool="echo", preload=("sandboxes.inside.echo",))
            rows["empty job"].append(used_ms() - before)
    finally:
        sandbox.close()
    bare, sandboxed = statistics.fmean(rows["bare"]), statistics.fmean(rows["sandbox"])
    print(f"{os.getcwd()}: {args.language}, {args.cases} cases, {args.responses} responses; "
          f"load_average={tuple(round(x, 2) for x in os.getloadavg())}")
    for name, values in rows.items():
        print(f"  {name:10s} mean {statistics.fmean(values):7.2f} ms, median {statistics.median(values):7.2f} ms CPU")
    print(f"  the sandbox adds {sandboxed - bare:.2f} ms of CPU per response: {sandboxed / bare:.3f}x bare")


if __name__ == "__main__":
    main()
