"""The `docker` backend: warm pools of hardened containers driven through the Docker SDK.

Each pool slot is one long-lived container running `sandboxes/worker.py --container=UID`
as its PID 1, attached over the engine's stdin/stdout stream, so a job costs a fork inside
a warm container instead of a container start. The containers have no network, a
read-only root, a tmpfs scratch, no capabilities but CAP_SETUID, CAP_SETGID, CAP_SETPCAP
and CAP_KILL (the root worker's, to start jobs as UID and end them; jobs have none),
no-new-privileges, a job uid of their own that differs from the worker's,
pids/memory/CPU limits, Docker's default seccomp profile and no log driver (the stream
carries payloads, hidden tests included, which must not land in logs).

Between jobs the worker kills every process the job left and wipes everything writable;
the host waits for its `clean` report before the container takes another job. A
container is replaced after a violation, after `max_jobs` jobs, when its cleanup fails
or when it stops answering. Containers carry labels naming the host and process that
made them, so a later start-up removes what a crashed run left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import random
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from sandboxes.base import CallResult, SandboxError, SandboxUnavailable
from sandboxes.factory import DEFAULT_IMAGE
from sandboxes.process import PROJECT_ROOT, SANDBOX_PACKAGES
from sandboxes.warm import STDERR_LINE_BYTES, WarmWorker, WarmWorkerBackend, WorkerTimings

log = logging.getLogger(__name__)

LABEL = "org.assay.sandbox"
LABEL_HOST = "org.assay.host"
LABEL_OWNER = "org.assay.owner"
LABEL_SOURCE = "org.assay.source-hash"
WORKER_PYTHON = "/opt/venv/bin/python"
WORKER_SCRIPT = "/opt/assay/sandboxes/worker.py"
CLEAN_TIMEOUT_S = 15.0
# Docker's short container id, as its own CLI prints it (for logs).
SHORT_ID = 12
# 409 Conflict from the engine: a removal of this container is already under way.
REMOVAL_IN_PROGRESS = 409
STREAM_CHUNK = 1 << 16
# Whole-container backstops (the worker enforces each job's own, smaller, limits).
CONTAINER_MAX_JOBS = 200
CONTAINER_MEMORY_MB = 2048
CONTAINER_CPUS = 1.0
CONTAINER_PIDS = 256
CONTAINER_SCRATCH_MB = 256
CONTAINER_SHM = "16m"
NANO = 10**9
# How long kill() waits for the stream reader to see the end before closing its pipe.
STREAM_END_WAIT_S = 5.0
DEMUX_HEADER = struct.Struct(">BxxxI")
# Every container gets a uid of its own: RLIMIT_NPROC counts processes per uid across
# the whole host, so a shared uid would let one container's jobs starve another's.
UID_RANGE = (200_000, 2_000_000_000)
# All the worker keeps: enough to start each job's supervisor under the jobs' uid.
WORKER_CAPABILITIES = ("SETUID", "SETGID", "SETPCAP", "KILL")
STREAM_STDOUT, STREAM_STDERR = 1, 2
SOURCE_SUFFIXES = (".py", ".json", ".jsonl")
SOURCE_HASH_CHARS = 16
# /proc/PID/stat, after the command name: field 22 (starttime) is at index 19.
STAT_STARTTIME = 19
# Docker's default masked paths plus what a job has no business reading: kernel tunables,
# IRQ and bus tables. Less in /proc also means that a candidate walking the filesystem
# burns less of its time budget. (/proc/1 cannot be masked: runc needs it at start.)
MASKED_PATHS = [
    "/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
    "/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs",
]


def source_hash(root: Path = PROJECT_ROOT) -> str:
    """Hash of the code that runs inside sandboxes; the runtime image carries it as a
    label so a stale image (code changed since `make images`) is noticed."""
    digest = hashlib.sha256()
    for package in SANDBOX_PACKAGES:
        base = root / package
        files = sorted(
            path
            for path in base.rglob("*")
            if path.is_file()
            and path.suffix in SOURCE_SUFFIXES
            and "__pycache__" not in path.parts
            and "images" not in path.relative_to(base).parts
        )
        for path in files:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:SOURCE_HASH_CHARS]


def _process_token(pid: int) -> str | None:
    """pid plus its start time: identifies one process even after pid reuse."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return f"{pid}:{fields[STAT_STARTTIME]}"
    except (OSError, IndexError):
        return None


def _docker_module() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise SandboxUnavailable("the docker backend needs the `docker` package (pip install docker)") from exc
    return docker


def check_runtime(client: Any, runtime: str) -> None:
    """SandboxUnavailable unless the engine knows the OCI runtime `runtime` (e.g. runsc)."""
    known = sorted((client.info().get("Runtimes") or {}).keys())
    if runtime not in known:
        raise SandboxUnavailable(
            f"the Docker engine has no runtime {runtime!r} (it has {', '.join(known) or 'none'}): install it "
            "(for gVisor: apt-get install runsc) and register it in /etc/docker/daemon.json (docs/security.md)",
            cause="runtime_missing",
        )


class ContainerWorker(WarmWorker):
    """One warm worker: a container whose PID 1 is `worker.py --container`."""

    def __init__(self, backend: DockerSandbox, preload: tuple[str, ...]) -> None:
        super().__init__()
        self._eof = threading.Event()
        self._killed = False
        api = backend.client.api
        self._api = api
        self.uid = random.randrange(*UID_RANGE)
        docker = _docker_module()
        try:
            self.container_id: str = self._create(backend, preload)
        except docker.errors.DockerException as exc:
            raise SandboxError("could not create a sandbox container", cause="container_start_failed") from exc
        try:
            # Attach before start: nothing the worker writes (its `ready`) can be missed,
            # and the HTTP client has buffered no stream bytes when the socket is taken.
            attached = api.attach_socket(
                self.container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._sock: socket.socket = getattr(attached, "_sock", attached)
            self._sock.settimeout(None)
            self.out_fd, self._out_w = os.pipe()
            threading.Thread(target=self._demux, daemon=True, name="assay-docker-demux").start()
            api.start(self.container_id)
            ready = self.read(time.monotonic() + backend.timings.start_timeout_s)
        except (docker.errors.DockerException, SandboxError) as exc:
            self.kill()
            raise SandboxError("could not start a sandbox container", cause="container_start_failed") from exc
        except BaseException:
            self.kill()
            raise
        if ready.get("t") != "ready":
            self.kill()
            raise SandboxError("a sandbox container did not start", cause="container_start_failed")

    def _create(self, backend: DockerSandbox, preload: tuple[str, ...]) -> str:
        api = self._api
        return api.create_container(
            backend.image,
            command=[WORKER_PYTHON, "-I", "-B", WORKER_SCRIPT, f"--container={self.uid}", ",".join(preload)],
            # The worker (init) is root with four capabilities; jobs run as `self.uid`
            # with none, so nothing a job runs can signal, renice or prlimit what outlives it.
            user="0:0",
            stdin_open=True,
            tty=False,
            network_disabled=True,
            working_dir="/tmp",
            labels=backend.labels(),
            host_config={**api.create_host_config(**backend.container_config()), "MaskedPaths": MASKED_PATHS},
        )["Id"]

    def _demux(self) -> None:
        """Split the engine's multiplexed stream: stdout frames to a pipe the session
        reads with select(), stderr lines to a bounded tail for the operator's log."""
        buf = b""
        line = b""
        try:
            while True:
                chunk = self._sock.recv(STREAM_CHUNK)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= DEMUX_HEADER.size:
                    stream, size = DEMUX_HEADER.unpack_from(buf)
                    if len(buf) < DEMUX_HEADER.size + size:
                        break
                    payload, buf = buf[DEMUX_HEADER.size : DEMUX_HEADER.size + size], buf[DEMUX_HEADER.size + size :]
                    if stream == STREAM_STDOUT:
                        self._forward(payload)
                    elif stream == STREAM_STDERR:
                        line += payload
                        *lines, line = line.split(b"\n")
                        self.stderr_tail.extend(item[:STDERR_LINE_BYTES] for item in lines)
                        line = line[-STDERR_LINE_BYTES:]
        except OSError:
            pass
        finally:
            if line:
                self.stderr_tail.append(line)
            self._eof.set()
            os.close(self._out_w)

    def _forward(self, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            view = view[os.write(self._out_w, view) :]

    def writable_fd(self) -> int:
        return self._sock.fileno()

    def write_some(self, data: bytes) -> int:
        return self._sock.send(data, socket.MSG_DONTWAIT)

    def await_clean(self, deadline: float) -> bool:
        """After `done`: wait until the worker has wiped the job's traces."""
        try:
            frame = self.read(deadline)
        except SandboxError as exc:
            log.warning("container %s failed after a job: %s", self.container_id[:SHORT_ID], exc)
            return False
        if frame.get("t") != "clean" or not frame.get("ok"):
            log.warning("container %s cleanup failed", self.container_id[:SHORT_ID])
            return False
        return True

    def alive(self) -> bool:
        return not self._eof.is_set() and not self._killed

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        docker = _docker_module()
        try:
            # auto_remove deletes it once stopped; force-remove covers a created-only one.
            self._api.remove_container(self.container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != REMOVAL_IN_PROGRESS:
                log.error("could not remove sandbox container %s: %s", self.container_id[:SHORT_ID], exc)
        if not hasattr(self, "out_fd"):
            return  # failed before the stream was attached
        with contextlib.suppress(OSError):
            self._sock.close()
        if self._eof.wait(STREAM_END_WAIT_S):
            os.close(self.out_fd)


class DockerSandbox(WarmWorkerBackend):
    """Hardened-container backend; same semantics as `ProcessSandbox`.

    `memory_mb`, `cpus`, `pids` and `scratch_mb` bound each container as a whole (a
    backstop); the per-job `Limits` are enforced inside it by the worker as in the
    process backend.
    """

    name = "docker"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        workers: int | None = None,
        *,
        timings: WorkerTimings | None = None,
        max_jobs: int = CONTAINER_MAX_JOBS,
        memory_mb: int = CONTAINER_MEMORY_MB,
        cpus: float = CONTAINER_CPUS,
        pids: int = CONTAINER_PIDS,
        scratch_mb: int = CONTAINER_SCRATCH_MB,
        base_url: str | None = None,
        host_label: str | None = None,
        runtime: str | None = None,
    ) -> None:
        super().__init__(workers, timings or WorkerTimings())
        docker = _docker_module()
        self.image = image
        self.max_jobs = max_jobs
        self.memory_mb, self.cpus, self.pids, self.scratch_mb = memory_mb, cpus, pids, scratch_mb
        self.host_label = host_label or socket.gethostname()
        self._owner = _process_token(os.getpid()) or f"{os.getpid()}:0"
        self._live: set[WarmWorker] = set()
        # Not the pools' lock: pools retire workers while close() holds that one.
        self._live_lock = threading.Lock()
        try:
            self.client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            self.client.ping()
        except Exception as exc:  # the SDK raises several types for "no engine here"
            raise SandboxUnavailable(
                f"the docker backend cannot reach a Docker engine ({exc}); start one "
                "(scripts/docker_engine.sh) or choose ASSAY_SANDBOX=process"
            ) from exc
        try:
            found = self.client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"sandbox image {self.image!r} is not on this engine; build it with `make images`"
            ) from exc
        self.runtime = runtime or None
        if self.runtime is not None:
            check_runtime(self.client, self.runtime)
        self.image_source = (found.labels or {}).get(LABEL_SOURCE)
        if self.image_source != source_hash():
            log.warning(
                "sandbox image %s was built from other sandbox/verifier code (%s, this tree %s): run `make images`",
                self.image, self.image_source, source_hash(),
            )
        self.removed_leftovers = self.remove_leftovers()
        atexit.register(self.close)

    # -------------------------------------------------------------- worker hooks

    def start_worker(self, preload: tuple[str, ...]) -> WarmWorker:
        worker = ContainerWorker(self, preload)
        with self._live_lock:
            self._live.add(worker)
        return worker

    def retire_worker(self, worker: WarmWorker) -> None:
        worker.kill()
        with self._live_lock:
            self._live.discard(worker)

    def job_ended(self, worker: WarmWorker, result: CallResult) -> bool:
        assert isinstance(worker, ContainerWorker)
        clean = worker.await_clean(time.monotonic() + CLEAN_TIMEOUT_S)
        # A violation means the job probed the walls: give the next job a new container.
        return clean and not result.violations and worker.jobs + 1 < self.max_jobs

    # ------------------------------------------------------------------ containers

    def labels(self) -> dict[str, str]:
        return {LABEL: "1", LABEL_HOST: self.host_label, LABEL_OWNER: self._owner}

    def container_config(self) -> dict[str, Any]:
        """HostConfig of every sandbox container: the hardening lives here."""
        return {
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={self.scratch_mb}m,mode=1777"},
            "shm_size": CONTAINER_SHM,
            "cap_drop": ["ALL"],
            "cap_add": list(WORKER_CAPABILITIES),
            # No seccomp option: Docker's default profile applies (never "unconfined").
            "security_opt": ["no-new-privileges"],
            "pids_limit": self.pids,
            "mem_limit": f"{self.memory_mb}m",
            "memswap_limit": f"{self.memory_mb}m",
            "nano_cpus": int(self.cpus * NANO),
            "ipc_mode": "private",
            "auto_remove": True,
            "init": False,  # the worker must be PID 1
            "log_config": {"Type": "none", "Config": {}},
            # runc (the engine's default) unless another runtime is configured, e.g. runsc.
            **({"runtime": self.runtime} if self.runtime else {}),
        }

    def remove_leftovers(self) -> int:
        """Remove sandbox containers this host made in processes that no longer run.

        A process is named by pid and start time, so a recycled pid (or the API restarted
        in its container, again as PID 1) does not pass for the process that made them."""
        docker = _docker_module()
        removed = 0
        filters = {"label": [f"{LABEL}=1", f"{LABEL_HOST}={self.host_label}"]}
        for container in self.client.containers.list(all=True, filters=filters):
            owner = container.labels.get(LABEL_OWNER, "")
            pid = owner.split(":")[0]
            if pid.isdigit() and _process_token(int(pid)) == owner:
                continue  # its process still runs (another sandbox, maybe in this process)
            try:
                container.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != REMOVAL_IN_PROGRESS:
                    raise
        if removed:
            log.info("removed %d sandbox containers left behind by earlier runs", removed)
        return removed

    # -------------------------------------------------------------------- interface

    def close(self) -> None:
        super().close()
        with self._live_lock:
            live = list(self._live)
            self._live.clear()
        for worker in live:  # also the ones a job still holds
            worker.kill()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "image": self.image,
            "image_source": self.image_source,
            "runtime": self.runtime or "default",
            "workers_per_pool": self.workers,
            "pools": self.pool_names(),
        }


if __name__ == "__main__":
    print(source_hash())
