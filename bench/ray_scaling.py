"""The Ray executor: throughput on 1 sandbox node vs 2, and per-request overhead vs `local`.

    python bench/ray_scaling.py [--responses 48] [--sleep 0.5] [--slots 4] [--requests 40]

Everything runs on this machine, in a private network namespace with only loopback (as
the tests do): a Ray head with no CPUs, sandbox nodes joined with `ray start`, and API
servers on Unix sockets with a SQLite audit store.

1. Scaling. Sleep-bound sandboxed work (code responses that sleep, then print), so that
   the nodes do not fight over this machine's cores: the same load on one node with
   `--slots` sandbox slots, then with a second node of the same size joined. On a
   2-core machine this shows that tasks spread over nodes and that added sandbox slots
   add throughput; it cannot show CPU-bound scaling (both "nodes" share the same two
   cores), which needs real machines.
2. Overhead. Sequential math groups of 8 through `ASSAY_EXECUTOR=ray` (one node, one
   slot, 2 warm sandbox workers) against `local` (2 sandbox workers): median latency per
   request, same groups, same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.testing.ray_cluster import PrivateNet, RayCluster, UdsServer  # noqa: E402

MATH_GROUP = {"verifier": "math", "task": {"answer": "\\frac{1}{2}"},
              "responses": [r"\boxed{1/2}", r"\boxed{0.5}", r"\boxed{1/3}", "no idea", r"\boxed{2/4}",
                            r"\boxed{-1/2}", r"The answer is $\frac{1}{2}$", r"\boxed{\frac{1}{2}}"]}


def sleeper_group(count: int, sleep_s: float) -> dict:
    code = f"```python\nimport time\ntime.sleep({sleep_s})\nprint('ok')\n```"
    return {"verifier": "code", "task": {"time_limit_s": 10 + sleep_s, "io_cases": [{"stdin": "", "stdout": "ok\n"}]},
            "responses": [code] * count}


def run_load(server: UdsServer, key: str, responses: int, sleep_s: float, per_request: int = 4) -> float:
    """Seconds to verify `responses` sleeping responses, sent as concurrent groups."""
    requests = [sleeper_group(per_request, sleep_s) for _ in range(responses // per_request)]

    def send(group: dict) -> list[str]:
        with server.client(key) as c:
            r = c.post("/v1/groups", json={"groups": [group]})
            r.raise_for_status()
            return [res["verdict"] for res in r.json()["groups"][0]["results"]]

    started = time.perf_counter()
    with ThreadPoolExecutor(len(requests)) as pool:
        verdicts = [v for vs in pool.map(send, requests) for v in vs]
    elapsed = time.perf_counter() - started
    assert verdicts == ["correct"] * len(verdicts), verdicts
    return elapsed


def latencies(server: UdsServer, key: str, requests: int) -> list[float]:
    out = []
    with server.client(key) as c:
        for _ in range(requests):
            started = time.perf_counter()
            r = c.post("/v1/groups", json={"groups": [MATH_GROUP]})
            r.raise_for_status()
            out.append(time.perf_counter() - started)
            assert r.json()["groups"][0]["rewards"] == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=48)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--slots", type=int, default=4, help="assay_sandbox slots per node")
    parser.add_argument("--requests", type=int, default=40, help="sequential math groups per executor")
    args = parser.parse_args()

    net = PrivateNet()
    cluster = None
    servers: list[UdsServer] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            cluster = RayCluster(net, nodes=1, sandbox_slots=args.slots, node_cpus=args.slots)
            env = {"ASSAY_DATABASE_URL": f"sqlite:///{work / 'audit.db'}", "HOME": cluster.env["HOME"],
                   "RAY_USAGE_STATS_ENABLED": "0"}
            ray_server = UdsServer(net, work, {**env, "ASSAY_EXECUTOR": "ray", "ASSAY_RAY_ADDRESS": cluster.address,
                                               "ASSAY_RAY_SANDBOX_WORKERS": "2"})
            servers.append(ray_server)
            key = ray_server.create_key("reward")

            # 1. scaling: warm every slot first, then measure.
            run_load(ray_server, key, 2 * args.slots, 0.1)
            one = run_load(ray_server, key, args.responses, args.sleep)
            cluster.add_node(args.slots, args.slots)
            run_load(ray_server, key, 4 * args.slots, 0.1)
            two = run_load(ray_server, key, args.responses, args.sleep)
            ideal = args.responses * args.sleep / args.slots
            print(f"scaling, {args.responses} responses sleeping {args.sleep}s, {args.slots} slots per node:")
            print(f"  1 node : {one:.2f}s  ({args.responses / one:.1f} responses/s; ideal {ideal:.2f}s)")
            print(f"  2 nodes: {two:.2f}s  ({args.responses / two:.1f} responses/s; ideal {ideal / 2:.2f}s)")
            print(f"  speed-up 2 nodes vs 1: {one / two:.2f}x (target >= 1.6x)")

            # 2. overhead: one node with one slot against the local executor, same groups.
            cluster.kill_node(1)
            cluster.nodes.pop(1)
            cluster.kill_node(0)
            cluster.nodes.pop(0)
            cluster.wait_for({"assay_sandbox": 0})
            cluster.add_node(1, 1)
            local_server = UdsServer(net, work, {**env, "ASSAY_EXECUTOR": "local"})
            servers.append(local_server)
            for server in (ray_server, local_server):
                latencies(server, key, 5)  # warm
            on_ray = latencies(ray_server, key, args.requests)
            on_local = latencies(local_server, key, args.requests)
            ray_ms, local_ms = statistics.median(on_ray) * 1000, statistics.median(on_local) * 1000
            print(f"overhead, {args.requests} sequential math groups of 8 (median per request):")
            print(f"  local: {local_ms:.1f} ms   ray: {ray_ms:.1f} ms   ratio ray/local: {ray_ms / local_ms:.2f}x "
                  "(target <= 1.3x)")
    finally:
        for server in servers:
            server.stop()
        if cluster is not None:
            cluster.close()
        net.close()


if __name__ == "__main__":
    main()
