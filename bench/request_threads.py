"""Where the API process's CPU goes per request, thread by thread (event loop, worker threads,
record writer), for trivially judged math requests sent one at a time over keep-alive.

    python bench/request_threads.py [--mode single|group] [--requests 2000] [--py-spy PATH]

Reads each thread's user and system CPU from /proc before and after; thread names come from
`py-spy dump` when py-spy is given (Python does not name its threads for the kernel), else
the thread ids are printed. Load is printed with the figures: read them with it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.testing.live import LiveServer  # noqa: E402

SINGLE = ("/v1/verify", {"verifier": "math", "task": {"answer": "1"}, "response": "\\boxed{1}"})
GROUP = ("/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": "1"}, "responses": [
    "\\boxed{1}", "\\boxed{2}", "3", "x", "1.0", "\\frac{2}{2}", "7", "\\boxed{1}"]}]})


def _threads(pid: int) -> dict[str, tuple[int, int]]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[tid] = (int(fields[11]), int(fields[12]))
    return out


def _names(pid: int, py_spy: str | None) -> dict[str, str]:
    if not py_spy:
        return {}
    dump = subprocess.run([py_spy, "dump", "-p", str(pid)], capture_output=True, text=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r'Thread (\d+) \([^)]*\): "([^"]*)"', dump)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("single", "group"), default="single")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--py-spy", default=None, help="py-spy binary, to name the threads")
    args = parser.parse_args()
    path, body = SINGLE if args.mode == "single" else GROUP
    tick = os.sysconf("SC_CLK_TCK")
    n = args.requests
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp))
        try:
            assert server.proc is not None
            with server.client() as client:
                for _ in range(100):
                    client.post(path, json=body).raise_for_status()
                before, own, latencies = _threads(server.proc.pid), time.process_time(), []
                for _ in range(n):
                    started = time.perf_counter()
                    client.post(path, json=body).raise_for_status()
                    latencies.append(time.perf_counter() - started)
                own = time.process_time() - own
                after = _threads(server.proc.pid)
                names = _names(server.proc.pid, args.py_spy)
        finally:
            server.stop()
    latencies.sort()
    print(f"{n} {args.mode} requests one at a time: p50 {1000 * latencies[n // 2]:.2f} ms, "
          f"p90 {1000 * latencies[int(n * 0.9)]:.2f} ms; client CPU {1000 * own / n:.2f} ms a request; "
          "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    total_user = total_sys = 0
    for tid, (user, system) in after.items():
        user0, system0 = before.get(tid, (0, 0))
        du, ds = user - user0, system - system0
        total_user, total_sys = total_user + du, total_sys + ds
        if du + ds:
            print(f"  {names.get(tid, tid)[:28]:28s} user {1000 * du / tick / n:.3f}  sys {1000 * ds / tick / n:.3f} "
                  "ms a request")
    print(f"  {'API process':28s} user {1000 * total_user / tick / n:.3f}  sys {1000 * total_sys / tick / n:.3f} "
          "ms a request")


if __name__ == "__main__":
    main()
