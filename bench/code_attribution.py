"""Where one compiled response's CPU goes, sandboxed (process backend) against bare.

    .venv/bin/python bench/code_attribution.py [--language c] [--cases 5] [--responses 20]

One response at a time, each a new source (a comment), through the code verifier's own
path (`native.compile_and_run`: the compile and the cases in one sandbox job) on a
`ProcessSandbox` with one warm worker; against it the bench's bare side (the same compile
command, then each case as a plain subprocess). CPU, not wall time: on a shared machine
the wall clock mostly measures the neighbours. The sandbox processes' CPU is read from
/proc in clock ticks (10 ms), so the means over many responses are the figures to read.
Per response:

- bare: the compiler's CPU, the cases' CPU (each a subprocess of this process);
- sandbox: the compiler's process tree (as the runner reports it), the cases' programs
  (each case's tree, as reported), the rest of the sandbox's CPU (worker, supervisor,
  job start and end, the runner: the sandbox processes' CPU read from /proc, less those
  two), of which an empty job (`sandboxes.inside.echo`) costs; and this process's own
  CPU around the call (payload, frames, judging).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import code_languages as bench  # noqa: E402, I001

from sandboxes.base import Limits  # noqa: E402
from sandboxes.process import ProcessSandbox  # noqa: E402
from verifiers.code import native, wire  # noqa: E402
from verifiers.code.task import CodeTask  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
ECHO = "sandboxes.inside.echo:echo"


def descendants_cpu() -> float:
    """CPU seconds of this process's descendants, live ones and what they waited for."""
    children: dict[int, list[tuple[int, float]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append((int(name), sum(int(x) for x in fields[11:15]) / TICK))
    total, stack = 0.0, [os.getpid()]
    while stack:
        for pid, cpu in children.get(stack.pop(), []):
            total += cpu
            stack.append(pid)
    return total


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="c")
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--responses", type=int, default=20)
    args = parser.parse_args()
    cases = bench.problem(1, args.cases)
    task = CodeTask.model_validate(bench.task(args.language, cases))
    plan = [(f"case[{i}]", True, case) for i, case in enumerate(task.io_cases or [])]
    sandbox = ProcessSandbox(workers=1)
    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds * 1000)

    try:
        sandbox.warm(native.RUN_POOL, wire.NATIVE_PRELOAD)
        sandbox.warm("echo", ("sandboxes.inside.echo",))
        for i in range(args.responses + 1):  # the first is a warm-up
            stamp = f"{time.time_ns()} {i}"
            # Bare: compile, then the cases, each timed apart.
            with bench.tempfile.TemporaryDirectory() as work:
                before = children_cpu()
                bench.bare(args.language, bench.variant(args.language, "bare " + stamp), [], work=work)
                compiled_bare = children_cpu()
                assert bench.bare(args.language, "", cases, compile_it=False, work=work)
                ran_bare = children_cpu()
            # An empty job on the same kind of worker.
            tree, mine = descendants_cpu(), own_cpu()
            sandbox.call(ECHO, {"x": 1}, Limits(), pool="echo", preload=("sandboxes.inside.echo",))
            echo = descendants_cpu() - tree
            # The response.
            tree, mine, started = descendants_cpu(), own_cpu(), time.perf_counter()
            compiled, fresh, runs = native.compile_and_run(sandbox, task, bench.variant(args.language, stamp), plan,
                                                           lambda: None)
            wall = time.perf_counter() - started
            host = own_cpu() - mine
            sandboxed = descendants_cpu() - tree
            assert fresh and len(runs) == len(plan) and all(run.status == "pass" for run in runs), runs
            if i == 0:
                continue
            programs = sum(run.cpu_s for run in runs)
            add("bare: compiler", compiled_bare - before)
            add(f"bare: {args.cases} cases", ran_bare - compiled_bare)
            add("bare: total", ran_bare - before)
            add("sandbox: compiler's tree", compiled.cpu_s)
            add(f"sandbox: {args.cases} cases' programs", programs)
            add("sandbox: the rest (worker, supervisor, job, runner)", sandboxed - compiled.cpu_s - programs)
            add("  of which an empty job costs", echo)
            add("host process (payload, frames, judging)", host)
            add("service: total", sandboxed + host)
            add("service: wall", wall)
    finally:
        sandbox.close()
    print(f"{args.language}, {args.cases} cases, {args.responses} responses, one at a time; "
          f"load_average={tuple(round(x, 2) for x in os.getloadavg())}")
    for name, values in rows.items():
        print(f"  {name:55s} mean {statistics.fmean(values):7.2f} ms, median {statistics.median(values):7.2f} ms")


if __name__ == "__main__":
    main()
