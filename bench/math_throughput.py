"""Math scoring throughput and agreement: Assay over HTTP (sandboxed, audited) against
Math-Verify in a process pool of as many processes as Assay has sandbox workers.

    python bench/math_throughput.py [--pairs 2000] [--workers 2] [--concurrency 8] [--profile] [--judge-only]
                                    [--costs-only] [--client raw|httpx]

Two pair sets: generated GRPO groups in common answer forms (`make_pairs`, Math-Verify with
its default configuration), and the (gold, prediction) pairs of Math-Verify's own suite
(tests/data/math_verify_suite.jsonl), where Math-Verify runs with each case's own
configuration (extraction targets, boxed priority, float rounding, strict, set relations), as
its test suite does. Every disagreement is printed with its category: on the suite, Assay
off the case's label (documented in docs/math_verifier.md or not), or Math-Verify off its own
label (a timeout, an error, or its judgement); on generated pairs, a timeout, an error or a
different judgement.
Both systems score the same pairs in the same run; the ratio is what to read, since
absolute times drift on shared machines. `--profile` also times the layers of Assay's path
(the judge alone in this process, the verifier through the sandbox, the whole HTTP path)
so that the cost of the sandbox messages and of HTTP/JSON + audit writes can be read off.

Assay is measured twice per set: one GRPO group per request, and one answer per request (how
verl's default reward manager and many scripts call a reward service). Then the service's own
cost per request (`request_costs`): the latency of a trivially judged answer sent one at a time
(p50), the wall time per request and the API process's CPU per request with 8 clients at once,
with the machine's load average and the fsync latency of the database's disk (a SQLite commit
with synchronous=FULL waits for one). Every Assay run also prints the API process's CPU and this
client's own CPU per request: the client runs on the same cores as the service.
Clients keep their connection (one client per client thread), as a trainer does. `--client raw`
(the default since perf4) is a lean keep-alive socket client (`RawClient`: real HTTP/1.1 and JSON,
~0.2 ms of CPU a request); `--client httpx` the httpx client of earlier rounds (~1.2-1.5 ms a
request, more than Math-Verify's whole per-pair IPC in its pool, on the same two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json as _json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from service.testing.live import LiveServer  # noqa: E402
from service.testing.math_suite import CASES, documented_disagreements  # noqa: E402
from service.testing.ray_cluster import descendants  # noqa: E402

Pair = tuple[str, str]  # (response, gold)
MathVerifyConfig = dict | None  # a suite case's config; None: Math-Verify's defaults
Scored = tuple[float, str]  # (reward, "ok" | "timeout" | "error")


def make_pairs(n: int, seed: int = 7) -> list[Pair]:
    """Golds in common forms; for each gold a GRPO group of 8 responses, equal or not,
    written several ways."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    while len(pairs) < n:
        a, b = rng.randint(1, 99), rng.randint(2, 60)
        kind = rng.randrange(8)
        if kind == 0:
            gold, same, other = str(a), [str(a), f"{a}.0"], [str(a + 1), str(-a)]
        elif kind == 1:
            gold = f"\\frac{{{a}}}{{{b}}}"
            same, other = [f"{a}/{b}", f"\\dfrac{{{2 * a}}}{{{2 * b}}}"], [f"{a + 1}/{b}"]
        elif kind == 2:
            gold, same, other = f"{a}\\sqrt{{2}}", [f"\\sqrt{{{2 * a * a}}}", f"{a} \\sqrt 2"], [f"{a}\\sqrt{{3}}"]
        elif kind == 3:
            gold, same, other = f"{a}.{b:02d}", [f"{a}.{b:02d}", f"{a}.{b:02d}0"], [f"{a}.{(b + 1) % 100:02d}"]
        elif kind == 4:
            gold, same, other = f"x^2 + {a}x", [f"x(x+{a})", f"{a}x + x^2"], [f"x^2 - {a}x"]
        elif kind == 5:
            gold, same, other = f"({a}, {b})", [f"({a},{b})", f"\\left({a}, {b}\\right)"], [f"({b}, {a})"]
        elif kind == 6:
            gold, same, other = f"[{a}, {a + b})", [f"[{a},{a + b})"], [f"({a}, {a + b})"]
        else:
            gold, same, other = f"{a}\\pi", [f"{a}\\pi", f"\\pi \\cdot {a}"], [f"{a + 1}\\pi"]
        for _ in range(8):
            answer = rng.choice(same) if rng.random() < 0.5 else rng.choice(other)
            template = rng.choice(["\\boxed{%s}", "Thus the answer is $\\boxed{%s}$.", "Final answer: $%s$",
                                   "We compute step by step.\n\nSo the result is \\boxed{%s}"])
            pairs.append((template % answer, f"${gold}$"))
    return pairs[:n]


def suite_pairs() -> list[Pair]:
    return [(case["pred"], case["gold"]) for case in CASES]


# ------------------------------------------------------------------------ Math-Verify

def _targets(kinds: list[str], boxed_priority: int | None) -> list:
    """The extraction targets Math-Verify's own tests build from a case's config."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    made = {"latex": lambda: LatexExtractionConfig(boxed_match_priority=boxed_priority),
            "expr": ExprExtractionConfig}
    return [made[kind]() for kind in kinds]


def _math_verify_call(response: str, gold: str, config: MathVerifyConfig, raise_on_error: bool) -> float:
    from math_verify import parse, verify

    loud = {"raise_on_error": raise_on_error}
    if config is None:
        return 1.0 if verify(parse(gold, **loud), parse(response, **loud), **loud) else 0.0
    ok = verify(parse(gold, _targets(config["gold_cfg"], config["boxed_priority"]), **loud),
                parse(response, _targets(config["pred_cfg"], config["boxed_priority"]), **loud),
                float_rounding=config["float_rounding"], strict=config["strict"],
                allow_set_relation_comp=config["allow_set_relation_comp"], **loud)
    return 1.0 if ok else 0.0


def _math_verify_one(response: str, gold: str, config: MathVerifyConfig) -> Scored:
    """Math-Verify's answer, told apart from its own timeouts (which it would report as "not equal")."""
    from math_verify.errors import TimeoutException

    try:
        return _math_verify_call(response, gold, config, raise_on_error=True), "ok"
    except TimeoutException:
        return 0.0, "timeout"
    except Exception:  # noqa: BLE001 - an internal error it normally swallows: take its ordinary answer
        try:
            return _math_verify_call(response, gold, config, raise_on_error=False), "ok"
        except Exception:  # noqa: BLE001
            return 0.0, "error"


def _math_verify_chunk(chunk: list[tuple[str, str, MathVerifyConfig]]) -> list[Scored]:
    return [_math_verify_one(*item) for item in chunk]


def run_math_verify(pairs: list[Pair], processes: int,
                    configs: list[MathVerifyConfig] | None = None) -> tuple[float, list[Scored]]:
    """Math-Verify in `processes` worker processes, in chunks of one GRPO group."""
    items = [(r, g, c) for (r, g), c in zip(pairs, configs or [None] * len(pairs), strict=True)]
    chunks = [items[i:i + 8] for i in range(0, len(items), 8)]
    with ProcessPoolExecutor(processes) as pool:
        list(pool.map(_math_verify_chunk, [[("\\boxed{1}", "$1$", None)]] * processes))  # import in every worker
        started = time.perf_counter()
        scored = [r for chunk in pool.map(_math_verify_chunk, chunks) for r in chunk]
        return time.perf_counter() - started, scored


# ------------------------------------------------------------------------------ Assay

def _groups(pairs: list[Pair]) -> list[list[Pair]]:
    """Consecutive pairs with the same gold, up to 8: one GRPO group per request."""
    groups: list[list[Pair]] = []
    for pair in pairs:
        if groups and groups[-1][0][1] == pair[1] and len(groups[-1]) < 8:
            groups[-1].append(pair)
        else:
            groups.append([pair])
    return groups


class _Answer:
    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return _json.loads(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"{self.status_code} {self.text[:300]}")


class RawClient:
    """A lean HTTP/1.1 keep-alive client on one socket: the request written in one `sendall`,
    the answer read by its Content-Length, JSON by the standard library. It does what httpx
    does for these requests at a fraction of the CPU (httpx spends 1.2-1.5 ms a request here,
    on the same two cores as the service it measures: docs/benchmarks.md, perf4). A reset
    connection raises `httpx.TransportError`, as httpx would, so callers retry alike."""

    def __init__(self, url: str, key: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self._address = (host, int(port))
        self._head = f"Host: {host}:{port}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        self._sock: socket.socket | None = None
        self._buffer = b""

    def post(self, path: str, json: Any) -> _Answer:  # noqa: A002 - httpx's keyword
        body = _json.dumps(json, separators=(",", ":")).encode()
        request = f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self._address)
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.sendall(request)
            return self._read()
        except OSError as exc:
            self.close()
            raise httpx.TransportError(str(exc)) from exc

    def _read(self) -> _Answer:
        assert self._sock is not None
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            self._more()
        head, self._buffer = self._buffer[:end].decode("latin-1"), self._buffer[end + 4:]
        lines = head.split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if "content-length" not in fields:
            raise httpx.TransportError(f"an answer without Content-Length: {head[:200]}")
        size = int(fields["content-length"])
        while len(self._buffer) < size:
            self._more()
        content, self._buffer = self._buffer[:size], self._buffer[size:]
        if fields.get("connection", "").lower() == "close":
            self.close()
        return _Answer(status, content)

    def _more(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise OSError("the server closed the connection")
        self._buffer += chunk

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buffer = None, b""

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


CLIENT = "raw"  # --client: "raw" (RawClient) or "httpx"


def new_client(server: LiveServer) -> RawClient | httpx.Client:
    return RawClient(server.url, server.admin_key) if CLIENT == "raw" else server.client()


class _Clients:
    """One keep-alive client per client thread, as a trainer holds one (`--client`)."""

    def __init__(self, server: LiveServer) -> None:
        self.server, self._local, self._all = server, threading.local(), []

    def get(self) -> RawClient | httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = new_client(self.server)
            self._all.append(client)
        return client

    def drop(self) -> None:
        """Forget this thread's client (its connection was reset)."""
        self._local.client = None

    def close(self) -> None:
        for client in self._all:
            client.close()


def run_assay(server: LiveServer, pairs: list[Pair], concurrency: int,
              singles: bool = False) -> tuple[float, list[float | None]]:
    """The pairs through HTTP: one GRPO group per request, or (`singles`) one answer per request."""
    retried: list[str] = []
    clients = _Clients(server)

    def send(group: list[Pair]) -> list[float | None]:
        if singles:
            path, body = "/v1/verify", {"verifier": "math", "task": {"answer": group[0][1]}, "response": group[0][0]}
        else:
            path, body = "/v1/groups", {"groups": [{"verifier": "math", "task": {"answer": group[0][1]},
                                                    "responses": [resp for resp, _ in group]}]}
        r = None
        for _ in range(3):
            try:
                r = clients.get().post(path, json=body)
            except httpx.TransportError:  # a reset connection on an overloaded host: count, retry
                clients.drop()
                retried.append(group[0][1])
                continue
            if r.status_code < 500:
                break
            retried.append(group[0][1])  # a 5xx: count, retry
        if r is None:
            raise RuntimeError("no answer from the server after 3 tries")
        if r.status_code >= 422:  # a gold Assay refuses as unparsable
            return [None] * len(group)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code} {r.text[:300]}\n{server.log_path.read_text()[-2000:]}")
        return [r.json()["reward"]] if singles else r.json()["groups"][0]["rewards"]

    units = [[pair] for pair in pairs] if singles else _groups(pairs)
    assert server.proc is not None
    server_cpu, client_cpu = _cpu_s(server.proc.pid), time.process_time()
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            rewards = [r for batch in pool.map(send, units) for r in batch]
    finally:
        clients.close()
    elapsed = time.perf_counter() - started
    server_cpu, client_cpu = _cpu_s(server.proc.pid) - server_cpu, time.process_time() - client_cpu
    print(f"({len(units)} requests: API process CPU {1000 * server_cpu / len(units):.2f} ms a request, this client's "
          f"CPU {1000 * client_cpu / len(units):.2f} ms a request, on the same cores)")
    if retried:
        print(f"retried after a 5xx or a reset connection: {len(retried)} requests, e.g. gold {retried[0][:60]!r}")
    return elapsed, rewards


def judge_in_process(pairs: list[Pair]) -> float:
    """Seconds to extract and judge the pairs in this process (our own parser on benchmark
    data): the judging cost alone, comparable across checkouts (`--judge-only`)."""
    from verifiers.math.extract import extract_answer, extract_gold
    from verifiers.math.inside.check import check_one

    started = time.perf_counter()
    for group in _groups(pairs):
        gold = extract_gold(group[0][1])
        for response, _ in group:
            found = extract_answer(response)
            if found.candidates:
                check_one({"candidates": found.candidates, "gold": group[0][1], "gold_candidates": gold.candidates})
    return time.perf_counter() - started


def profile_layers(pairs: list[Pair], workers: int) -> dict[str, float]:
    """Seconds for the same pairs through each layer of Assay's path, but HTTP."""
    from sandboxes.factory import create_sandbox
    from verifiers import registry
    from verifiers.base import TaskInvalid, VerifyContext

    groups = _groups(pairs)
    judge_s = judge_in_process(pairs)
    verifier = registry.get("math")
    box = create_sandbox("process", workers=workers)
    try:
        ctx = VerifyContext(box)
        verifier.verify_many(verifier.parse_task({"answer": "1"}), ["\\boxed{1}"], ctx)  # warm a session

        def one(group: list[Pair]) -> None:
            with contextlib.suppress(TaskInvalid):
                verifier.verify_many(verifier.parse_task({"answer": group[0][1]}), [r for r, _ in group], ctx)

        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, groups))
        sandbox_s = time.perf_counter() - started
    finally:
        box.close()
    return {"judge_in_process_1_core": judge_s, "verifier_via_sandbox": sandbox_s,
            "audit_append_sqlite": _time_audit_appends(len(groups))}


def _time_audit_appends(groups: int) -> float:
    """The audit writes alone: one transaction of 8 records per group, as the engine does."""
    from service.store import AuditStore
    from service.tables import RecordRow, TaskBlobRow, new_record_id

    with tempfile.TemporaryDirectory() as tmp:
        store = AuditStore(f"sqlite:///{tmp}/audit.db")
        started = time.perf_counter()
        for g in range(groups):
            blob = TaskBlobRow(task_hash=f"{g:064x}", verifier="math", task={"answer": str(g)})
            rows = [RecordRow(id=new_record_id(), caller_key_id="bench", task_hash=blob.task_hash, task_public={},
                              verifier="math", verifier_version="bench", response_hash="0" * 64,
                              response=f"\\boxed{{{i}}}", components={"format": {"value": 1.0, "hard": True}},
                              reward=1.0, verdict="correct", evidence={"extracted": str(i)}, flags=[],
                              sandbox_backend="process", duration_ms=1.0, group_id=f"g{g}", group_index=i)
                    for i in range(8)]
            store.append(rows, [blob])
        elapsed = time.perf_counter() - started
        store.engine.dispose()
        return elapsed


def http_without_judging(server: LiveServer, groups: int, concurrency: int) -> float:
    """The HTTP/JSON + audit path with nothing to judge: 8 responses in which no answer is found."""
    prose = "We considered the problem at length but reached no conclusion that could be stated here. " * 2
    body = {"groups": [{"verifier": "math", "task": {"answer": "1", "last_number_fallback": False},
                        "responses": [prose] * 8}]}

    clients = _Clients(server)

    def send(_: int) -> None:
        clients.get().post("/v1/groups", json=body).raise_for_status()

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(send, range(groups)))
    finally:
        clients.close()
    return time.perf_counter() - started


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _fsync_ms(folder: Path, count: int = 50) -> float:
    """p50 of fsync after a 4 KiB write in `folder` (what a durable SQLite commit waits for)."""
    times = []
    path = folder / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(count):
            os.write(fd, b"x" * 4096)
            started = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return 1000 * statistics.median(times)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of the API server, without its sandbox workers: `assay serve`'s
    process and, with ASSAY_API_PROCESSES > 1, the API processes it supervises."""
    total = 0.0
    for process in descendants(pid):
        try:
            cmdline = Path(f"/proc/{process}/cmdline").read_bytes()
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if process == pid or b"service.cli\0serve" in cmdline:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def request_costs(server: LiveServer, sequential: int = 400, concurrent: int = 1600, clients: int = 8) -> None:
    """The service's own cost per request, with a trivially judged answer (`\\boxed{1}` against 1):
    latency one request at a time, then wall time and server CPU per request with `clients` at once."""
    body = {"verifier": "math", "task": {"answer": "1"}, "response": "\\boxed{1}"}
    assert server.proc is not None
    print(f"\n== service cost per request (trivially judged single answers); {_load()}; "
          f"fsync p50 {_fsync_ms(server.workdir):.2f} ms on the database's disk")
    with new_client(server) as c:
        for _ in range(50):
            c.post("/v1/verify", json=body).raise_for_status()
        latencies = []
        cpu, own = _cpu_s(server.proc.pid), time.process_time()
        for _ in range(sequential):
            started = time.perf_counter()
            c.post("/v1/verify", json=body).raise_for_status()
            latencies.append(time.perf_counter() - started)
        cpu, own = _cpu_s(server.proc.pid) - cpu, time.process_time() - own
    latencies.sort()
    print(f"sequential, {sequential} requests: latency p50 {1000 * latencies[len(latencies) // 2]:.2f} ms, "
          f"p90 {1000 * latencies[int(len(latencies) * 0.9)]:.2f} ms; server CPU {1000 * cpu / sequential:.2f} ms "
          f"a request, client CPU {1000 * own / sequential:.2f} ms a request; {_load()}")
    pool_clients = _Clients(server)

    def send(_: int) -> None:
        pool_clients.get().post("/v1/verify", json=body).raise_for_status()

    cpu, own = _cpu_s(server.proc.pid), time.process_time()
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(send, range(concurrent)))
    finally:
        pool_clients.close()
    elapsed = time.perf_counter() - started
    cpu, own = _cpu_s(server.proc.pid) - cpu, time.process_time() - own
    print(f"{clients} clients, {concurrent} requests: {concurrent / elapsed:.0f} requests/s, "
          f"{1000 * elapsed / concurrent:.2f} ms of wall time a request, server CPU {1000 * cpu / concurrent:.2f} ms "
          f"a request, client CPU {1000 * own / concurrent:.2f} ms a request; {_load()}")


def _category(math_verify: Scored, case: dict | None, documented: set[str]) -> str:
    """Why the two graders differ on one pair."""
    reward, status = math_verify
    if status != "ok":
        return f"math-verify {status}"
    if case is None:
        return "judgement differs"
    if (reward == 1.0) != case["expected"]:
        return "math-verify off its own label"
    listed = case["source"] in documented
    return "assay off the label, documented" if listed else "assay off the label, NOT documented"


def _report(name: str, pairs: list[Pair], mv: tuple[float, list[Scored]], assay: tuple[float, list[float | None]],
            workers: int, cases: list[dict] | None = None, how: str = "groups") -> None:
    (mv_s, mv_scored), (assay_s, assay_rewards) = mv, assay
    mv_rewards = [reward for reward, _ in mv_scored]
    print(f"\n== {name}: {len(pairs)} pairs, Assay {how}; {_load()}")
    print(f"math-verify, pool of {workers} processes: {mv_s:.2f}s  {len(pairs) / mv_s:.0f} pairs/s")
    print(f"assay HTTP, {workers} sandbox workers ({how}, sandboxed, audited): {assay_s:.2f}s  "
          f"{len(pairs) / assay_s:.0f} pairs/s")
    print(f"throughput ratio assay/math-verify at equal workers ({how}): {mv_s / assay_s:.2f}x")
    refused = sum(r is None for r in assay_rewards)
    print(f"rewarded: assay {sum(r or 0 for r in assay_rewards):.0f}, math-verify {sum(mv_rewards):.0f}; "
          f"golds refused by assay: {refused}; math-verify timeouts: "
          f"{sum(s == 'timeout' for _, s in mv_scored)}, errors: {sum(s == 'error' for _, s in mv_scored)}")
    if cases is not None:
        agree = sum(((a or 0.0) == 1.0) == case["expected"] for a, case in zip(assay_rewards, cases, strict=True))
        print(f"assay agrees with the suite's labels on {agree} of {len(cases)}")
    documented = documented_disagreements()
    by_category: dict[str, list[str]] = {}
    for i, ((response, gold), a, m) in enumerate(zip(pairs, assay_rewards, mv_scored, strict=True)):
        if (a or 0.0) != m[0]:
            case = cases[i] if cases is not None else None
            where = case["source"] if case else f"gold={gold[-40:]!r} response={response[-50:]!r}"
            by_category.setdefault(_category(m, case, documented), []).append(
                f"{where} assay={a} math-verify={m[0]:g}")
    print(f"disagreements: {sum(map(len, by_category.values()))} "
          f"({100 * sum(map(len, by_category.values())) / len(pairs):.1f}%)")
    for category, lines in sorted(by_category.items()):
        print(f"  {category}: {len(lines)}")
        for line in lines[:12]:
            print(f"    {line}")


def judge_only(sets: dict[str, list[Pair]], rounds: int = 5) -> None:
    """CPU seconds (best of `rounds`, our caches cleared each round) to judge each set in this
    process: on a loaded machine CPU time is steadier than wall time, so two checkouts can be
    compared one after the other."""
    from verifiers.math.inside import check, normalise

    check.sandbox_warm_up()
    for name, pairs in sets.items():
        best = float("inf")
        for _ in range(rounds):
            normalise.normalise.cache_clear()
            check._parse_gold.cache_clear()
            started = time.process_time()
            judge_in_process(pairs)
            best = min(best, time.process_time() - started)
        print(f"{name}: judge in process {best:.3f} CPU s (best of {rounds}) for {len(pairs)} pairs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2, help="Assay sandbox workers = Math-Verify processes")
    parser.add_argument("--concurrency", type=int, default=8, help="HTTP requests in flight")
    parser.add_argument("--api-processes", type=int, default=1,
                        help="ASSAY_API_PROCESSES: the --workers sandbox workers are split between them")
    parser.add_argument("--profile", action="store_true", help="also time the layers of Assay's path")
    parser.add_argument("--judge-only", action="store_true",
                        help="only time extraction + judging in this process (no server, no Math-Verify), "
                             "to compare checkouts at the same load")
    parser.add_argument("--costs-only", action="store_true",
                        help="only the service's cost per request (latency, 8 clients), no Math-Verify")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="the HTTP client of the Assay runs: a lean keep-alive socket client, or httpx")
    args = parser.parse_args()
    global CLIENT
    CLIENT = args.client
    print(f"client: {CLIENT}; {_load()}")
    sets = {"generated GRPO groups": make_pairs(args.pairs), "Math-Verify suite": suite_pairs()}
    if args.judge_only:
        judge_only(sets)
        return
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(Path(tmp), env={"ASSAY_SANDBOX_WORKERS": str(args.workers),
                                            "ASSAY_API_PROCESSES": str(args.api_processes)})
        try:
            run_assay(server, sets["generated GRPO groups"][:64], args.concurrency)  # warm sessions and caches
            if not args.costs_only:
                for name, pairs in sets.items():
                    cases = CASES if name == "Math-Verify suite" else None
                    mv = run_math_verify(pairs, args.workers, [c["config"] for c in cases] if cases else None)
                    assay = run_assay(server, pairs, args.concurrency)
                    singles = run_assay(server, pairs, args.concurrency, singles=True)
                    _report(name, pairs, mv, assay, args.workers, cases)
                    _report(name, pairs, mv, singles, args.workers, cases, how="one answer per request")
                    if args.profile:
                        layers = profile_layers(pairs, args.workers)
                        layers["http_without_judging"] = http_without_judging(server, len(_groups(pairs)),
                                                                              args.concurrency)
                        print("profile (seconds): " + ", ".join(f"{k} {v:.2f}" for k, v in layers.items())
                              + f", http_total {assay[0]:.2f}")
            request_costs(server)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
