"""Two checkouts' `assay serve` side by side, trivially judged requests alternated between
them in chunks, so that both see the same load: the API process's CPU a request (median and
best chunk), latency, requests a second. Each server runs its own checkout's code and venv
(`<checkout>/.venv/bin/python`); the client is bench/math_throughput.py's `RawClient`.

    python bench/request_ab.py BASE_CHECKOUT BRANCH_CHECKOUT single|group CLIENTS CHUNK ROUNDS

e.g. `python bench/request_ab.py /work/main . single 8 200 8`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import math_throughput as mt  # noqa: E402

from service.testing.live import free_port  # noqa: E402

SINGLE = ("/v1/verify", {"verifier": "math", "task": {"answer": "1"}, "response": "\\boxed{1}"})
GROUP = ("/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": "1"}, "responses": [
    "\\boxed{1}", "\\boxed{2}", "3", "x", "1.0", "\\frac{2}{2}", "7", "\\boxed{1}"]}]})


class Server:
    def __init__(self, name: str, repo: str, tmp: str) -> None:
        self.name = name
        py = f"{repo}/.venv/bin/python"
        env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{tmp}/{name}.db", "ASSAY_SANDBOX_WORKERS": "2",
               "ASSAY_WARM_UP": "math"}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(f"{tmp}/{name}.log", "ab") as log:
            self.proc = subprocess.Popen([py, "-m", "service.cli", "serve", "--port", str(self.port),
                                          "--log-level", "warning"], env=env, cwd=repo, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        out = subprocess.run([py, "-m", "service.cli", "keys", "create", "--scopes", "reward"], env=env, cwd=repo,
                             capture_output=True, text=True, check=True)
        self.key = out.stdout.strip()
        self._local = threading.local()
        self.clients: list[mt.RawClient] = []

    def client(self) -> mt.RawClient:
        found = getattr(self._local, "client", None)
        if found is None:
            found = self._local.client = mt.RawClient(self.url, self.key)
            self.clients.append(found)
        return found

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.proc.terminate()
        self.proc.wait()


def main() -> None:
    base, branch = (str(Path(p).resolve()) for p in sys.argv[1:3])
    mode, clients, chunk, rounds = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    path, body = SINGLE if mode == "single" else GROUP
    with tempfile.TemporaryDirectory() as tmp:
        servers = [Server("base", base, tmp), Server("branch", branch, tmp)]
        pool = ThreadPoolExecutor(clients)
        stats = {s.name: {"cpu": [], "lat": [], "wall": []} for s in servers}

        def run(s: Server, n: int) -> tuple[float, list[float], float]:
            lat: list[float] = []

            def one(_: int) -> None:
                started = time.perf_counter()
                try:
                    r = s.client().post(path, json=body)
                except httpx.TransportError:  # a keep-alive closed while the other server had its turn
                    r = s.client().post(path, json=body)
                lat.append(time.perf_counter() - started)
                assert r.status_code == 200, r.text

            started, cpu = time.perf_counter(), mt._cpu_s(s.proc.pid)
            if clients == 1:
                for i in range(n):
                    one(i)
            else:
                list(pool.map(one, range(n)))
            return mt._cpu_s(s.proc.pid) - cpu, lat, time.perf_counter() - started

        try:
            for s in servers:
                run(s, 100)  # warm
            print(f"{mode}, {clients} clients, {rounds} rounds of {chunk} a server, alternating; {mt._load()}")
            for r in range(rounds):
                for s in servers if r % 2 == 0 else servers[::-1]:
                    cpu, lat, wall = run(s, chunk)
                    stats[s.name]["cpu"].append(cpu / chunk)
                    stats[s.name]["lat"] += lat
                    stats[s.name]["wall"].append(wall)
            for s in servers:
                st = stats[s.name]
                lat = sorted(st["lat"])
                print(f"{s.name:6s} server CPU a request: median {1000 * statistics.median(st['cpu']):.2f} ms "
                      f"(min {1000 * min(st['cpu']):.2f}); latency p50 {1000 * lat[len(lat) // 2]:.2f} ms, "
                      f"p90 {1000 * lat[int(len(lat) * 0.9)]:.2f}; {rounds * chunk / sum(st['wall']):.0f} req/s")
            print(mt._load())
        finally:
            for s in servers:
                s.stop()


if __name__ == "__main__":
    main()
