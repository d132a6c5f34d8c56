"""tool_state throughput: 1,000 traces of 10 calls through the HTTP API in groups, against
replaying the same traces in-process with the same domain code (no sandbox, no HTTP, no
audit records). Also reports the middle layer (the verifier with its sandbox, no HTTP) so
that the cost of each layer is visible. All three are measured in this run.

    python bench/tool_state_throughput.py [--traces 1000] [--group-size 16] [--groups-per-request 16] [--repeats 3]

It starts `assay serve` on a free port with a temporary SQLite audit store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sandboxes.process import ProcessSandbox  # noqa: E402
from service.testing.live import LiveServer  # noqa: E402
from verifiers import registry  # noqa: E402
from verifiers.base import VerifyContext  # noqa: E402
from verifiers.tool_state.examples import GOLD_TRANSFER, transfer_task  # noqa: E402
from verifiers.tool_state.inside.replay import check  # noqa: E402
from verifiers.tool_state.wire import dumps_trace  # noqa: E402

CALLS_PER_TRACE = 10


def make_traces(n: int, seed: int = 7) -> list[str]:
    """Rollout-like traces: reads (some of another customer's account), the gold transfer
    (sometimes missing or doubled), and a final message (sometimes spraying values)."""
    rng = random.Random(seed)
    reads = [
        {"tool": "list_accounts", "args": {}},
        {"tool": "get_balance", "args": {"account_id": "A1"}},
        {"tool": "get_balance", "args": {"account_id": "A3"}},
        {"tool": "get_balance", "args": {"account_id": "A2"}},
        {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": "500"}},
    ]
    weights = [3, 4, 3, 1, 1]
    traces = []
    for _ in range(n):
        calls = rng.choices(reads, weights, k=CALLS_PER_TRACE - 1)
        roll = rng.random()
        if roll < 0.7:
            calls.insert(rng.randrange(CALLS_PER_TRACE), GOLD_TRANSFER)
        elif roll < 0.85:
            calls.append({"tool": "transfer", "args": {"from_account": "A3", "to_account": "A4", "amount": 100}})
        else:
            calls.append({"tool": "get_balance", "args": {"account_id": "A1"}})
        message = "Done, your balance is 450." if rng.random() < 0.9 else "It is 440, 445, 450 or 455."
        traces.append(dumps_trace(calls, message))
    return traces


def in_process(task: dict[str, Any], traces: list[str], repeats: int) -> float:
    spec = registry.get("tool_state").parse_task(task).replay_spec()  # type: ignore[attr-defined]
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for t in traces:
            check({**spec, "response": t})
        best = min(best, time.perf_counter() - started)
    return best


def verifier_only(task: dict[str, Any], traces: list[str], group_size: int, repeats: int) -> tuple[float, list[str]]:
    """Groups one after another, as one trainer thread calling the verifier would."""
    verifier = registry.get("tool_state")
    parsed = verifier.parse_task(task)
    sandbox = ProcessSandbox(workers=2)
    best, verdicts = float("inf"), []
    try:
        ctx = VerifyContext(sandbox)
        verifier.warm(ctx)
        for _ in range(repeats):
            started = time.perf_counter()
            verdicts = []
            for i in range(0, len(traces), group_size):
                verdicts += [o.verdict.value for o in verifier.verify_many(parsed, traces[i : i + group_size], ctx)]
            best = min(best, time.perf_counter() - started)
        return best, verdicts
    finally:
        verifier.close(ctx)
        sandbox.close()


def through_api(task: dict[str, Any], traces: list[str], group_size: int, per_request: int,
                repeats: int) -> tuple[float, list[str]]:
    server = LiveServer(Path(tempfile.mkdtemp(prefix="assay-bench-")))
    try:
        groups = [traces[i : i + group_size] for i in range(0, len(traces), group_size)]
        verdicts: list[str] = []
        with server.client(timeout=300) as client:
            warm = {"verifier": "tool_state", "task": task, "responses": traces[:2]}
            client.post("/v1/groups", json={"groups": [warm]}).raise_for_status()
            best = float("inf")
            for _ in range(repeats):
                started = time.perf_counter()
                verdicts = []
                for i in range(0, len(groups), per_request):
                    body = {"groups": [{"verifier": "tool_state", "task": task, "responses": g}
                                       for g in groups[i : i + per_request]]}
                    response = client.post("/v1/groups", json=body)
                    response.raise_for_status()
                    verdicts += [r["verdict"] for g in response.json()["groups"] for r in g["results"]]
                best = min(best, time.perf_counter() - started)
        return best, verdicts
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--groups-per-request", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="best of N for each measurement (shared machines)")
    args = parser.parse_args()
    task = transfer_task()
    traces = make_traces(args.traces)

    base_s = in_process(task, traces, args.repeats)
    verifier_s, verifier_verdicts = verifier_only(task, traces, args.group_size, args.repeats)
    api_s, api_verdicts = through_api(task, traces, args.group_size, args.groups_per_request, args.repeats)
    # Again after the others: on a shared machine the baseline is the figure most hurt by
    # a burst of load, and the ratio is only honest if the baseline is at its best too.
    base_s = min(base_s, in_process(task, traces, args.repeats))
    assert api_verdicts == verifier_verdicts, "the API and the verifier disagree"
    counts = {v: api_verdicts.count(v) for v in sorted(set(api_verdicts))}

    n = len(traces)
    rows = [("in-process replay (baseline)", base_s), ("verifier + sandbox, no HTTP", verifier_s),
            (f"HTTP /v1/groups ({args.group_size}/group, {args.groups_per_request} groups/request)", api_s)]
    print(f"{n} traces of {CALLS_PER_TRACE} calls; verdicts {json.dumps(counts)}; best of {args.repeats} runs each")
    for name, seconds in rows:
        print(f"  {name:<52} {seconds:8.3f} s  {n / seconds:10.0f} traces/s  {seconds / base_s:7.1f}x baseline")
    print(f"ratio API / in-process: {api_s / base_s:.1f}x (target: within 3x); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
