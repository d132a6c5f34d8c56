"""The floor under a reward request on this stack: what the same uvicorn costs with nothing
behind it, what the service's HTTP stack costs without the pipeline, and what a whole
trivially judged `/v1/verify` costs, measured in one run, alternating.

    python bench/request_floor.py [--requests 2000] [--clients 8] [--rounds 4]

Three servers on loopback, each `uvicorn.run` as `assay serve` runs it (httptools, uvloop,
no access log, log level warning), each sent the same single-answer body by the bench's lean
keep-alive client (bench/math_throughput.py `RawClient`):

- `bare`: an ASGI app that reads the body and answers a real `/v1/verify` answer (fixed
  bytes): the server, the event loop and the sockets alone.
- `stack`: `create_app` as deployed (middlewares, edge guard with its key read, the reward
  lane, validation, the answer written by pydantic), with `Pipeline.verify` answering a fixed
  result: the service's HTTP path without judging, records, receipts or the commit.
- `full`: `create_app` as deployed, the real pipeline (sandboxed judging, records, receipt,
  the durable SQLite commit).

Prints the API process's CPU a request (user + system from /proc; its sandbox workers are
other processes), one client at a time and with `--clients` at once, and the load.
"""

from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BODY = {"verifier": "math", "task": {"answer": "1"}, "response": "\\boxed{1}"}
# A real `/v1/verify` answer to BODY (the `stack` server answers it every time).
_HASH, _SIG = "13fa1bd281ba49e5d51605d7" * 2 + "0" * 16, "kG9rM7qvD7HB0zkWm7S91fnextTKuzOMJLfQrlBf" * 2 + "AAAAAAAA"
_COMPONENTS = {"format": {"value": 1.0, "hard": True}, "correctness": {"value": 1.0, "hard": True}}
ANSWER = json.dumps({
    "record_id": "fc5e923e98384a31a558f1f19bb60f60", "verifier": "math", "verifier_version": "2.1.0", "reward": 1.0,
    "verdict": "correct", "components": _COMPONENTS,
    "evidence": {"extracted": "1", "extraction": "boxed", "answer_normalised": "1", "gold_normalised": "1",
                 "how": "identical"},
    "feedback": {"verdict": "correct", "extracted": "1", "extraction": "boxed", "answer_normalised": "1"},
    "flags": ["answer_only"], "flag_evidence": {"answer_only": {"response_chars": 9}}, "duration_ms": 0.478,
    "task_id": None, "task_hash": _HASH, "request_id": None, "tokens": None, "finish_reason": None, "masked": False,
    "receipt": {"payload": {"record_id": "fc5e923e98384a31a558f1f19bb60f60", "task_hash": _HASH, "response_hash": _HASH,
                            "verifier": "math", "verifier_version": "2.1.0", "verdict": "correct", "reward": 1.0,
                            "components": _COMPONENTS, "time": "2026-12-02T05:22:13.098491+00:00"},
                "key_id": "f70f9066d0b1a318", "signature": _SIG}})
MODES = ("bare", "stack", "full")


def _serve(mode: str, port: int) -> None:
    import uvicorn

    from service.logs import configure_logging

    if mode == "bare":
        answer = ANSWER.encode()

        async def app(scope, receive, send):  # noqa: ANN001, ANN202 - a bare ASGI app
            if scope["type"] != "http":
                return
            more = True
            while more:
                more = (await receive()).get("more_body", False)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer})
    else:
        from service.app import create_app
        from service.config import Settings

        if mode == "stack":
            from service.pipeline import Pipeline
            from service.schemas import VerifyResult

            fixed = VerifyResult.model_validate_json(ANSWER)

            async def verify(self, req, caller):  # noqa: ANN001, ANN202, ARG001 - Pipeline.verify's signature
                return fixed

            Pipeline.verify = verify  # type: ignore[method-assign]
        app = create_app(Settings())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", log_config=configure_logging("warning"),
                access_log=False)


class Server:
    def __init__(self, mode: str, workdir: Path) -> None:
        import httpx

        from service.testing.live import free_port

        self.mode, self.port = mode, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{workdir / mode}.db", "ASSAY_SANDBOX_WORKERS": "2",
               "ASSAY_WARM_UP": "math"}
        subprocess.run([sys.executable, "-m", "service.cli", "db", "upgrade"], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", mode, str(self.port)], env=env, cwd=ROOT,
                                     stdout=open(workdir / f"{mode}.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"{mode}: no server: {(workdir / f'{mode}.log').read_text()[-2000:]}")
        out = subprocess.run([sys.executable, "-m", "service.cli", "keys", "create", "--scopes", "reward"], env=env,
                             cwd=ROOT, capture_output=True, text=True, check=True)
        self.key = out.stdout.strip()
        self._local = threading.local()
        self._clients: list = []

    def client(self):  # noqa: ANN201
        from math_throughput import RawClient

        found = getattr(self._local, "client", None)
        if found is None:
            found = self._local.client = RawClient(self.url, self.key)
            self._clients.append(found)
        return found

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, count: int, pool: ThreadPoolExecutor | None) -> float:
        """CPU seconds of the server a request, for `count` requests."""
        import httpx

        def one(_: int) -> None:
            try:
                r = self.client().post("/v1/verify", json=BODY)
            except httpx.TransportError:  # uvicorn closed a keep-alive idle for 5 s (another server's turn)
                r = self.client().post("/v1/verify", json=BODY)  # RawClient reconnects
            assert r.status_code == 200, r.text

        before = self.cpu_s()
        if pool is None:
            for i in range(count):
                one(i)
        else:
            list(pool.map(one, range(count)))
        return (self.cpu_s() - before) / count

    def stop(self) -> None:
        for c in self._clients:
            c.close()
        self.proc.terminate()
        self.proc.wait()


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="requests a server a round (each way)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--serve", nargs=2, metavar=("MODE", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve[0], int(args.serve[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        servers = [Server(mode, Path(tmp)) for mode in MODES]
        pool = ThreadPoolExecutor(args.clients)
        try:
            for s in servers:
                s.send(200, pool)  # warm: caches, sessions, connections
            seq: dict[str, list[float]] = {s.mode: [] for s in servers}
            par: dict[str, list[float]] = {s.mode: [] for s in servers}
            print(f"{args.rounds} rounds, {args.requests} requests a server a round each way; {_load()}")
            for r in range(args.rounds):
                for s in servers if r % 2 == 0 else servers[::-1]:
                    seq[s.mode].append(s.send(args.requests // 4, None))
                    par[s.mode].append(s.send(args.requests, pool))
            for s in servers:
                print(f"{s.mode:5s}: API process CPU a request, one client "
                      f"{1000 * statistics.median(seq[s.mode]):.3f} ms "
                      f"(min {1000 * min(seq[s.mode]):.3f}), {args.clients} clients "
                      f"{1000 * statistics.median(par[s.mode]):.3f} ms (min {1000 * min(par[s.mode]):.3f})")
            print(_load())
        finally:
            for s in servers:
                s.stop()


if __name__ == "__main__":
    main()
