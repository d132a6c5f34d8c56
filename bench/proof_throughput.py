"""proof throughput: set.mm proofs checked by the `proof` verifier (warm sandboxed sessions
that already hold set.mm) against running Debian's `metamath` once per proof (read set.mm,
verify the proof), with equal parallelism: as many metamath processes at once as the
sandbox has workers. Both are measured in this run; the ratio is printed.

    python bench/proof_throughput.py [--proofs 400] [--baseline-proofs 16] [--workers 2]

The verifier is called through its Python API (no HTTP, no audit records). With `--steady`,
groups of `syl` proofs go through POST /v1/groups on a real `assay serve` instead, timed
end to end: the first group after start, warm groups, groups after `--idle-s` idle and
after a mix of other proof requests (other theorems, an inline database, task errors):

    python bench/proof_throughput.py --steady [--backend process|docker] [--group 40] [--idle-s 130]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
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
        verifier.warm(ctx)  # what the service does at start: workers read set.mm, servers open

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


# -- steady proofs through HTTP: groups of `syl` proofs through POST /v1/groups on `assay serve`

SYL_PROOF = "$= ( wi a1i mpd ) ABCDBCFAEGH $."
SYL_TASK = {"system": "metamath", "database": "set.mm", "theorem": "syl"}
# Other proof work between groups (the "mixed" case): other theorems, an inline database,
# a statement target, a task error, broken proofs.
INLINE_DB = "$c ( ) -> wff |- $.\n$v p q $.\nwp $f wff p $.\nwq $f wff q $.\nwi $a wff ( p -> q ) $.\n" \
            "${ min $e |- p $.\n maj $e |- ( p -> q ) $.\n ax-mp $a |- q $. $}\n" \
            "${ a.1 $e |- p $.\n a.2 $e |- ( p -> q ) $.\n th $p |- q $= wp wq a.1 a.2 ax-mp $. $}\n"
MIXED = [
    ({"system": "metamath", "database": "set.mm", "theorem": "mp2"}, "$= wph wps wch mp2.1 mp2.2 mp2.3 mp2 $."),
    ({"system": "metamath", "database": "set.mm", "theorem": "3syl"}, "$= ( syl ) ACDABCEFHGH $."),
    ({"system": "metamath", "database_text": INLINE_DB, "theorem": "th"}, "$= wp wq a.1 a.2 ax-mp $."),
    ({"system": "metamath", "database": "set.mm", "theorem": "syl", "forbidden_axioms": ["ax-1"]}, SYL_PROOF),
    ({"system": "metamath", "database": "set.mm", "theorem": "no-such-theorem"}, SYL_PROOF),
    ({"system": "metamath", "database": "set.mm", "theorem": "syl"}, "$= ( wi a1i mpd ) ABCDBCFAEG? $."),
]


class Served:
    """`assay serve` in a subprocess (uvicorn), with its own SQLite audit log."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        import os
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{workdir / 'audit.db'}", **env}
        self.log = open(workdir / "server.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
                                      "--log-level", "warning"], env=self.env, cwd=REPO, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        import httpx

        deadline = time.monotonic() + 300
        while True:
            assert self.proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.ready_at = time.perf_counter()
        key = subprocess.run([sys.executable, "-m", "service.cli", "keys", "create", "--scopes", "reward"],
                             env=self.env, cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600,
                                   headers={"Authorization": f"Bearer {key}"})

    def group(self, task: dict, responses: list[str]) -> tuple[float, dict]:
        started = time.perf_counter()
        reply = self.client.post("/v1/groups", json={"groups": [{"verifier": "proof", "task": task,
                                                                  "responses": responses}]})
        elapsed = time.perf_counter() - started
        assert reply.status_code in (200, 400), reply.text
        return elapsed, reply.json()

    def syl_group(self, size: int) -> float:
        elapsed, body = self.group(SYL_TASK, [f"```metamath\n{SYL_PROOF}\n```"] * size)
        rewards = body["groups"][0]["rewards"]
        assert rewards == [1.0] * size, body
        return elapsed

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


def steady_run(backend: str, size: int, idle_s: float, rounds: int) -> Iterator[tuple[str, float]]:
    """Milliseconds per proof of a group of `size` syl proofs, case by case: first after
    start, warm, after `idle_s` idle (the resident servers are recycled after 120 s), after
    mixed proof work."""
    import os
    import tempfile

    env = {"ASSAY_SANDBOX": backend, "ASSAY_SANDBOX_WORKERS": os.environ.get("ASSAY_SANDBOX_WORKERS", "2")}
    with tempfile.TemporaryDirectory() as workdir:
        served = Served(Path(workdir), env)
        try:
            yield "first after start", 1000 * served.syl_group(size) / size
            for _ in range(rounds):
                yield "warm", 1000 * served.syl_group(size) / size
            for _ in range(rounds):
                time.sleep(idle_s)
                yield f"after {idle_s:g} s idle", 1000 * served.syl_group(size) / size
            for _ in range(rounds):
                for task, proof in MIXED:
                    served.group(task, [proof] * 4)
                yield "after mixed proof requests", 1000 * served.syl_group(size) / size
        finally:
            served.close()

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proofs", type=int, default=400)
    parser.add_argument("--baseline-proofs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steady", action="store_true",
                        help="instead: groups of syl proofs through POST /v1/groups on `assay serve`")
    parser.add_argument("--backend", default="process", help="with --steady: ASSAY_SANDBOX")
    parser.add_argument("--group", type=int, default=40, help="with --steady: proofs in a group")
    parser.add_argument("--idle-s", type=float, default=130.0, help="with --steady: idle time before a group")
    parser.add_argument("--rounds", type=int, default=1, help="with --steady: groups per case")
    args = parser.parse_args()
    if args.steady:
        print(f"backend {args.backend}, groups of {args.group} syl proofs through POST /v1/groups")
        for case, ms in steady_run(args.backend, args.group, args.idle_s, args.rounds):
            print(f"{case}: {ms:.1f} ms a proof", flush=True)
        print(f"load average after: {os.getloadavg()}")
        return
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
