"""Instructions a request in the API process, counted by callgrind: a cost that the machine's load does not move.

    python bench/request_icount.py [--checkout PATH] [--warm 50] [--requests 200]
                                   [--kind single|group8|pairs] [--threads] [--out DIR]

Wall-clock and CPU-time figures on the shared 2-core machine move by 20-30% between runs
(docs/benchmarks.md, "Merged main after round 9"); instruction counts do not. This starts
`assay serve` of a checkout (its own `.venv`, run from the checkout so that its own code is
imported; SQLite, 2 sandbox workers) under `valgrind --tool=callgrind --instr-atstart=no`,
sends `--warm` requests, switches instrumentation on (`callgrind_control -i on`), sends
`--requests` one at a time over one keep-alive socket, dumps, and prints the instructions
(callgrind's Ir, user space) a request. Only the API process is counted: the sandbox workers
run outside valgrind, as do the client and `assay keys create`.

Kinds: `single`, a trivially judged answer (`\\boxed{1}` against 1, as `math_throughput.py
--costs-only` sends); `group8`, a group of eight such answers through /v1/groups; `pairs`, the
generated pairs of `math_throughput.py` (seed 7) one answer a request, then `--requests`
trivial singles after them (two dumps).

Callgrind runs the server ~50-100x slower than native, so the two timers that decide work
are stretched alike: the record writer's idle catch-up of the SQLite rollups (50 ms, which
at callgrind's speed would run after every request instead of once per 256 records) and the
chain heads' signature interval (`ASSAY_AUDIT_SIGN_INTERVAL_S`, 10 s, which would sign once
every ~20 requests instead of every ~1,000). `--threads` writes one dump per thread
(`--separate-threads=yes`): the event loop, the record writer, the verify thread.

Needs valgrind (`apt-get install valgrind`); `callgrind_annotate` reads the dumps in `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The server's entry point under callgrind: `assay serve` with the rollups' idle catch-up stretched.
SERVE = ("import runpy, sys; import service.batch_rollups as b; b.CATCH_UP_IDLE_S = 5.0; "
         "sys.argv = ['assay'] + sys.argv[1:]; runpy.run_module('service.cli', run_name='__main__')")
TRIVIAL = ("/v1/verify", {"verifier": "math", "task": {"answer": "1"}, "response": "\\boxed{1}"})
GROUP8 = ("/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": "1"}, "responses": ["\\boxed{1}"] * 8}]})


class Server:
    """`assay serve` of one checkout under callgrind, and one keep-alive connection to it."""

    def __init__(self, checkout: Path, out: Path, threads: bool) -> None:
        self.checkout, self.out = checkout, out
        self.python = str(checkout / ".venv" / "bin" / "python")
        workdir = Path(tempfile.mkdtemp(prefix="request_icount_"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{workdir / 'audit.db'}",
                    "ASSAY_SANDBOX_WORKERS": "2", "ASSAY_AUDIT_SIGN_INTERVAL_S": "1000"}
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p",
                   f"--separate-threads={'yes' if threads else 'no'}", self.python, "-c", SERVE,
                   "serve", "--port", str(self.port), "--log-level", "warning"]
        self.proc = subprocess.Popen(command, cwd=checkout, env=self.env, stdout=open(out / "server.log", "wb"),  # noqa: SIM115
                                     stderr=subprocess.STDOUT)
        self._wait_ready()
        create_key = [self.python, "-m", "service.cli", "keys", "create", "--scopes", "reward,audit,admin"]
        self.key = subprocess.run(create_key, cwd=checkout, env=self.env, capture_output=True, text=True,
                                  check=True).stdout.strip()
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def _wait_ready(self) -> None:
        started = time.monotonic()
        while time.monotonic() - started < 900:  # callgrind starts the service in 1-4 minutes here
            if self.proc.poll() is not None:
                sys.exit("the server exited: " + (self.out / "server.log").read_text()[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as c:
                    c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if c.recv(64).startswith(b"HTTP/1.1 200"):
                        print(f"ready after {time.monotonic() - started:.0f} s", flush=True)
                        return
            except OSError:
                pass
            time.sleep(0.5)
        sys.exit("the server did not become ready")

    def request(self, path: str, body: dict) -> bytes:
        payload = json.dumps(body, separators=(",", ":")).encode()
        return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode() + payload

    def post(self, request: bytes) -> None:
        self.sock.sendall(request)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.buffer += self.sock.recv(65536)
        head = self.buffer[:end].decode("latin-1")
        size = int(re.search(r"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        self.buffer = self.buffer[end + 4:]
        while len(self.buffer) < size:
            self.buffer += self.sock.recv(65536)
        if not head.startswith("HTTP/1.1 200"):
            sys.exit(f"{head}\n{self.buffer[:300]!r}")
        self.buffer = self.buffer[size:]

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True, capture_output=True)

    def measured(self, label: str, requests: list[bytes]) -> None:
        """Count the instructions of these requests, in a dump named `label`."""
        self.control("-z")
        self.control("-i", "on")
        started = time.monotonic()
        for request in requests:
            self.post(request)
        self.control("-i", "off")
        self.control("-d", label)
        print(f"{label}: {len(requests)} requests in {time.monotonic() - started:.1f} s under callgrind", flush=True)

    def stop(self) -> None:
        self.sock.close()
        self.proc.terminate()
        self.proc.wait(timeout=300)


def totals(out: Path, pid: int) -> dict[str, int]:
    """Instructions by dump label (summed over threads)."""
    found: dict[str, int] = {}
    for dump in sorted(out.glob(f"cg.{pid}*")):
        head = dump.read_text(errors="replace")[:3000]
        label = re.search(r"Trigger: dump (\w+)", head)
        if label is None:
            continue
        annotated = subprocess.run(["callgrind_annotate", str(dump)], capture_output=True, text=True).stdout
        total = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotated)
        thread = re.search(r"^thread: (\d+)", head, re.M)
        count = int(total.group(1).replace(",", "")) if total else 0
        if count:  # --threads: the threads that ran nothing in the window are left out
            print(f"  {dump.name}{f' thread {thread.group(1)}' if thread else ''} ({label.group(1)}): {count:,} Ir")
        found[label.group(1)] = found.get(label.group(1), 0) + count
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="a checkout with its own .venv (default: this one)")
    parser.add_argument("--warm", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--kind", choices=("single", "group8", "pairs"), default="single")
    parser.add_argument("--threads", action="store_true", help="one dump per thread")
    parser.add_argument("--out", type=Path, default=None, help="where the dumps go (default: a new temporary folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="request_icount_out_"))
    out.mkdir(parents=True, exist_ok=True)
    server = Server(args.checkout.resolve(), out, args.threads)
    trivial = server.request(*(GROUP8 if args.kind == "group8" else TRIVIAL))
    try:
        if args.kind == "pairs":
            sys.path.insert(0, str(ROOT / "bench"))
            from math_throughput import make_pairs
            pairs = [server.request("/v1/verify", {"verifier": "math", "task": {"answer": gold}, "response": response})
                     for response, gold in make_pairs(args.requests + args.warm)]
            for request in pairs[:args.warm]:
                server.post(request)
            server.measured("pairs", pairs[args.warm:])
        for _ in range(args.warm):
            server.post(trivial)
        server.measured(args.kind if args.kind != "pairs" else "single", [trivial] * args.requests)
    finally:
        server.stop()
    print(f"{args.checkout} ({out}):")
    for label, count in totals(out, server.proc.pid).items():
        print(f"{label}: {count / args.requests / 1e6:.3f} M instructions a request")


if __name__ == "__main__":
    main()
