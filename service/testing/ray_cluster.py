"""A real Ray cluster and real API servers for the tests, all inside a private network
namespace with only loopback up, so nothing they do can reach another address.

The namespace is held open by a process of ours; every Ray process and API server is
started in it with nsenter. API servers listen on Unix sockets (files are not scoped
by network namespaces), which is how the tests, outside, talk to them; Postgres is
reached the same way. Ray gets its own HOME and temp dir, usage statistics off and a
small object store. Everything is stopped by pid, never with `ray stop`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from service.testing.live import REPO, terminate

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 80 * 1024 * 1024
HEAD_PORT = 6380
START_ATTEMPTS = 5
# Notice a dead node within a few seconds instead of Ray's default half minute.
FAST_HEALTH_CHECKS = {"RAY_health_check_initial_delay_ms": "0", "RAY_health_check_period_ms": "500",
                      "RAY_health_check_timeout_ms": "500", "RAY_health_check_failure_threshold": "3"}
# Ray workers belong to one driver (API replica) and idle ones past the node's CPU count
# are ended after a second: keep them, and their warm sandboxes, for every replica.
KEEP_WARM_WORKERS = {"RAY_num_workers_soft_limit": "8", "RAY_idle_worker_killing_time_threshold_ms": "600000"}


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def kill_tree(pid: int) -> list[int]:
    """SIGKILL a process and all its descendants, by pid."""
    pids = descendants(pid)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return pids


class PrivateNet:
    """A network namespace with only `lo` up, held open by a sleeping process of ours."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(["unshare", "-n", "--", "sh", "-c", "ip link set lo up && exec sleep 86400"],
                                       start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            links = self.run(["ip", "-o", "link", "show", "up"]).stdout
            if "lo" in links:
                break
            time.sleep(0.05)
        up = [line.split(":")[1].strip() for line in self.run(["ip", "-o", "link", "show", "up"]).stdout.splitlines()]
        assert up == ["lo"], f"the private namespace must have only loopback up, not {up}"

    def prefix(self) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--"]

    def run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.prefix() + command, capture_output=True, text=True, check=True)

    def start(self, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(self.prefix() + command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def close(self) -> None:
        kill_tree(self.holder.pid)
        self.holder.wait()


class RayCluster:
    """A head with no CPUs (it never runs verification) and sandbox nodes that each
    advertise `assay_sandbox`, started with Ray's own CLI inside `net`."""

    def __init__(self, net: PrivateNet, nodes: int = 2, sandbox_slots: int = 1, node_cpus: int = 1) -> None:
        self.net = net
        # Short: Ray's Unix socket paths must fit in 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="ar", dir="/tmp"))
        (self.root / "home").mkdir()
        self.address = f"127.0.0.1:{HEAD_PORT}"
        self.env = {**os.environ, "HOME": str(self.root / "home"), "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_DISABLE_DOCKER_CPU_WARNING": "1", **FAST_HEALTH_CHECKS, **KEEP_WARM_WORKERS}
        self.env.pop("RAY_ADDRESS", None)
        self.common = ["--block", "--node-ip-address=127.0.0.1", f"--object-store-memory={OBJECT_STORE_BYTES}",
                       "--disable-usage-stats"]
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.head = self.start([RAY, "start", "--head", f"--port={HEAD_PORT}", "--num-cpus=0",
                                "--include-dashboard=false", f"--temp-dir={self.root / 't'}", *self.common],
                               self.root / "head.log")
        try:
            for _ in range(nodes):
                self.add_node(sandbox_slots, node_cpus)
        except BaseException:
            self.close()  # nothing of a cluster that failed to start is left running
            raise

    def add_node(self, sandbox_slots: int = 1, cpus: int = 1) -> subprocess.Popen[bytes]:
        node = self.start([RAY, "start", f"--address={self.address}", f"--num-cpus={cpus}",
                           f"--resources={json.dumps({'assay_sandbox': sandbox_slots})}", *self.common],
                          self.root / f"node{len(self.nodes)}.log")
        self.nodes.append(node)
        return node

    def start(self, command: list[str], log: Path) -> subprocess.Popen[bytes]:
        """`ray start --block`, again if it gave up: Ray gives a raylet a fixed 30 s to
        register, which a loaded 2-core machine may not meet."""
        for attempt in range(1, START_ATTEMPTS + 1):
            proc = self.net.start(command, self.env, log)
            try:
                self.wait_started(proc, log)
                return proc
            except RuntimeError:
                kill_tree(proc.pid)
                proc.wait()
                if attempt == START_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def wait_started(proc: subprocess.Popen[bytes], log: Path, timeout: float = 240) -> None:
        """`ray start --block` says so once its node has registered with the head."""
        log_offset = log.read_text(errors="replace").count("Ray runtime started") if log.exists() else 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited: {log.read_text()[-3000:]}")
            if log.read_text(errors="replace").count("Ray runtime started") > log_offset:
                return
            time.sleep(0.2)
        raise RuntimeError(f"ray start did not finish in {timeout}s: {log.read_text()[-3000:]}")

    def sandbox_slots(self) -> float:
        return self.resources().get("assay_sandbox", 0)

    def resources(self) -> dict[str, float]:
        """The cluster's live resources, asked from inside the namespace."""
        script = (f"import json, ray; ray.init(address={self.address!r}, logging_level='ERROR'); "
                  "print(json.dumps(ray.cluster_resources()))")
        out = subprocess.run(self.net.prefix() + [sys.executable, "-c", script], env=self.env, capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0:
            return {}
        return json.loads(out.stdout.strip().splitlines()[-1])

    def wait_for(self, resources: dict[str, float], timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.head.poll() is not None:
                raise RuntimeError(f"ray head exited: {(self.root / 'head.log').read_text()[-3000:]}")
            have = self.resources()
            if have and all(have.get(k, 0) == v for k, v in resources.items()):
                return
            time.sleep(0.5)
        raise RuntimeError(f"cluster did not reach {resources}; logs in {self.root}")

    def kill_node(self, index: int) -> list[int]:
        """Crash a sandbox node: SIGKILL its `ray start` process and everything under it."""
        return kill_tree(self.nodes[index].pid)

    def close(self) -> None:
        # Ray's agents outlive a killed raylet: collect every descendant before anything stops.
        everything = [pid for proc in [*self.nodes, self.head] for pid in descendants(proc.pid)]
        for proc in [*self.nodes, self.head]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.nodes, self.head]:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                proc.wait()
        for pid in everything:  # anything Ray left behind, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


class UdsServer:
    """An API server (uvicorn on a Unix socket) inside the private namespace."""

    def __init__(self, net: PrivateNet, workdir: Path, env: dict[str, str]) -> None:
        self.net, self.workdir, self.extra_env = net, workdir, env
        self.socket = workdir / f"api-{len(list(workdir.glob('api-*.sock')))}.sock"
        self.log = self.socket.with_suffix(".log")
        self.proc = net.start([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                               "--uds", str(self.socket), "--log-level", "warning"], self.env(), self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"API server exited: {self.log.read_text()[-3000:]}")
            try:
                with self.client("none") as c:
                    if c.get("/readyz").status_code == 200:
                        return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"API server did not become ready: {self.log.read_text()[-3000:]}")

    def env(self) -> dict[str, str]:
        return {**os.environ, "ASSAY_SANDBOX_WORKERS": "2", **self.extra_env}

    def create_key(self, scopes: str) -> str:
        out = subprocess.run(self.net.prefix() + [sys.executable, "-m", "service.cli", "keys", "create", "--scopes",
                                                  scopes], env=self.env(), cwd=REPO, capture_output=True, text=True,
                             check=True)
        return out.stdout.strip().splitlines()[-1]

    def client(self, key: str, timeout: float = 180) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://assay",
                            headers={"Authorization": f"Bearer {key}"}, timeout=timeout)

    def stop(self) -> None:
        terminate(self.proc, kill=kill_tree)
