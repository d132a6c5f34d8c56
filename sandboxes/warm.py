"""What every warm-worker backend shares: workers, pools, call sessions, the backend base.

A backend (bubblewrap processes, Docker containers) keeps pools of long-lived workers
(`sandboxes/inside/worker.py`), each reached through a byte stream that carries frames. A job
is sent to an idle worker, which forks a supervisor and the job; the host then reads
the job's frames until its `done`. A backend implements `WarmWorkerBackend`'s three
hooks (start a worker, retire one, decide whether one may take another job); the pool
and the call-session logic here are the only copies.

Who is to blame when a call fails is decided here, once. Every frame carries the job's
nonce. Until the supervisor says `started`, no code of the job has run, so any failure
is the infrastructure's: the call is retried once on a fresh worker, then raised as a
`SandboxError` with a stable `cause`. After `started`, an unanswering, broken or
out-of-step worker ends the call as the job's own outcome (a timeout, or a violation of
the protocol channel), never as `error`: a response cannot turn its verdict into `error`.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import itertools
import logging
import os
import queue
import secrets
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sandboxes.base import (
    CallEnded,
    CallResult,
    CallSession,
    Job,
    JobResult,
    Limits,
    MessageHandler,
    PayloadRefused,
    RequestTimeout,
    Sandbox,
    SandboxBusy,
    SandboxError,
)
from sandboxes.frames import (
    CPU_WAIT_CREDIT_MAX_S,
    KILL_REASONS,
    MAX_FRAME,
    MAX_VIOLATIONS,
    VIOLATION_CHARS,
    FrameError,
    FrameReader,
    done_frame_limit,
    encode_frame,
)

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 50
STDERR_LINE_BYTES = 500
# How much of a worker's stderr goes to the operator's log with a failure.
STDERR_LOG_CHARS = 1500
NONCE_BYTES = 16
# The channel violation the host records when a running job's worker broke protocol.
BROKEN_CHANNEL = "the job broke its sandbox's protocol channel"
# A frame the host was to send for the job (its id echoed, an answer to it, data it
# steered) is over the channel's limits: never sent, and the job is ended.
REFUSED_FRAME = "the job's channel carried a frame over its size or nesting limits"
# While a send waits for the worker to take input, how often it checks the worker lives.
SEND_TICK_S = 0.1
SUPERVISOR_FAILED = "the sandbox supervisor failed while the job ran"
# Tries for a job whose worker fails before the job starts (the second on a new worker).
START_ATTEMPTS = 2
# Pools of `interact`'s first and second job.
INTERACT_POOLS = ("interact-first", "interact-second")


@dataclass(frozen=True)
class WorkerTimings:
    """Host-side clocks of a warm-worker backend (configuration, passed down)."""

    # A worker must say `ready` within this, and a sent job `started`.
    start_timeout_s: float = 60.0
    # Grace beyond a job's wall limit before its worker is presumed stuck.
    host_grace_s: float = 5.0
    # How long a call waits for a free worker before SandboxBusy.
    acquire_timeout_s: float = 30.0


class WorkerTimeout(SandboxError):
    """The worker sent nothing in time."""

    cause = "worker_unresponsive"


class WorkerBroken(SandboxError):
    """The worker's stream ended, or carried bytes that are not our frames."""

    cause = "worker_died"


class WarmWorker(abc.ABC):
    """One long-lived worker reached through a byte stream.

    Subclasses give the descriptor frames are read from (`out_fd`, a pipe) and write
    bytes without blocking (`write_some`, `writable_fd`)."""

    out_fd: int

    def __init__(self) -> None:
        self.jobs = 0
        self.stderr_tail: deque[bytes] = deque(maxlen=STDERR_TAIL_LINES)
        self._reader: FrameReader | None = None

    @abc.abstractmethod
    def writable_fd(self) -> int:
        """What select() waits on before `write_some`."""

    @abc.abstractmethod
    def write_some(self, data: bytes) -> int:
        """Write without blocking; BlockingIOError when full, OSError when gone."""

    @abc.abstractmethod
    def alive(self) -> bool: ...

    @abc.abstractmethod
    def kill(self) -> None: ...

    def send_bytes(self, encoded: bytes, deadline: float) -> None:
        """Write one encoded frame; a worker that died or stopped reading ends it at once
        (WorkerBroken) or at the deadline (WorkerTimeout)."""
        data = memoryview(encoded)
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout("the worker took no input in time")
            if not select.select([], [self.writable_fd()], [], min(remaining, SEND_TICK_S))[1]:
                if not self.alive():
                    raise WorkerBroken("the worker ended while input was sent to it")
                continue
            try:
                data = data[self.write_some(data) :]
            except BlockingIOError:
                continue
            except OSError as exc:
                raise WorkerBroken("the worker's input closed") from exc

    def read(self, deadline: float, limit: int = MAX_FRAME) -> dict[str, Any]:
        """The next frame (at most `limit` bytes); WorkerTimeout or WorkerBroken otherwise.
        Never blocks past the deadline, whatever the worker writes."""
        if self._reader is None:
            os.set_blocking(self.out_fd, False)
            self._reader = FrameReader(self.out_fd)
        self._reader.limit = limit
        while True:
            try:
                frame = self._reader.next()
            except FrameError as exc:
                raise WorkerBroken("the worker sent a malformed frame") from exc
            if frame is not None:
                return frame
            if self._reader.eof:
                raise WorkerBroken("the worker's output ended")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.out_fd], [], [], remaining)[0]:
                raise WorkerTimeout("the worker did not answer in time")
            self._reader.fill()

    def stderr_text(self) -> str:
        """For the operator's log only, never for evidence."""
        return b"".join(self.stderr_tail).decode(errors="replace")[-STDERR_LOG_CHARS:]


class WorkerPool:
    """A bounded set of warm workers that share a preload list."""

    def __init__(self, backend: WarmWorkerBackend, preload: tuple[str, ...], size: int) -> None:
        self.backend = backend
        self.preload = preload
        self.size = size
        self._idle: queue.LifoQueue[WarmWorker] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._taken = 0  # slots held by callers now (for metrics)
        self.started = 0  # workers started for this pool, replacements included
        self._taken_lock = threading.Lock()

    def _count_taken(self, delta: int) -> None:
        with self._taken_lock:
            self._taken += delta

    def _count_started(self) -> None:
        with self._taken_lock:
            self.started += 1

    def stats(self) -> dict[str, int]:
        """Worker slots, warm idle workers, and slots in use now."""
        return {"size": self.size, "idle": self._idle.qsize(), "in_use": self._taken}

    def acquire(self, timeout_s: float) -> WarmWorker:
        if not self._slots.acquire(timeout=timeout_s):
            raise SandboxBusy(f"no sandbox worker free within {timeout_s:.0f}s")
        self._count_taken(1)
        try:
            while True:
                try:
                    worker = self._idle.get_nowait()
                except queue.Empty:
                    worker = self.backend.start_worker(self.preload)
                    self._count_started()
                    return worker
                if worker.alive():
                    return worker
                self.backend.retire_worker(worker)
        except BaseException:
            self._count_taken(-1)
            self._slots.release()
            raise

    def release(self, worker: WarmWorker, healthy: bool) -> None:
        if healthy and worker.alive():
            self._idle.put(worker)
        else:
            self.backend.retire_worker(worker)
        self._count_taken(-1)
        self._slots.release()

    def warm(self) -> None:
        """Start every worker now, all at once (a worker's start may be slow: it preloads).
        Every worker taken is given back, also when another failed to start."""
        taken: list[WarmWorker] = []
        failed: list[SandboxError] = []

        def take() -> None:
            try:
                taken.append(self.acquire(self.backend.timings.start_timeout_s))
            except SandboxError as exc:
                failed.append(exc)

        starting = [threading.Thread(target=take, name="assay-pool-warm", daemon=True) for _ in range(self.size)]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        for worker in taken:
            self.release(worker, True)
        if failed:
            raise failed[0]

    def close(self) -> None:
        while True:
            try:
                self.backend.retire_worker(self._idle.get_nowait())
            except queue.Empty:
                return


class WorkerCallSession(CallSession):
    """A call (or command) running on one worker of a pool."""

    def __init__(self, backend: WarmWorkerBackend, pool: WorkerPool, worker: WarmWorker, nonce: str,
                 limits: Limits, on_message: MessageHandler | None) -> None:
        self._backend = backend
        self._pool = pool
        self._worker: WarmWorker | None = worker
        self._nonce = nonce
        self._started_at = time.monotonic()
        self._deadline = self._started_at + limits.wall_s + CPU_WAIT_CREDIT_MAX_S + backend.timings.host_grace_s
        self._on_message = on_message
        self._ids = itertools.count(1)
        self._done: CallResult | None = None
        # Violations the host saw (a frame it refused to send), added to the result.
        self._violations: list[str] = []
        self._read_limit = done_frame_limit(limits.output_bytes)
        self._lock = threading.Lock()
        # A stream job's output goes here as it comes (see `interact`); writes to the
        # worker are serialised, since a peer's relay writes from another thread.
        self._on_out: Callable[[bytes, bool], None] | None = None
        self._send_lock = threading.RLock()

    # -- reading

    def _next_frame(self, deadline: float) -> dict[str, Any]:
        assert self._worker is not None
        frame = self._worker.read(deadline, self._read_limit)
        if frame.get("n") != self._nonce:
            raise WorkerBroken("a frame of another job")
        return frame

    def _pump(self, want_answer: int | None, deadline: float | None = None) -> Any:
        """Read frames until the answer `want_answer` (or `done` when None) arrives.
        A request's own deadline (shorter than the call's) raises WorkerTimeout."""
        while self._done is None:
            until = min(deadline or self._deadline, self._deadline)
            try:
                frame = self._next_frame(until)
            except WorkerTimeout:
                if deadline is not None and deadline < self._deadline:
                    raise
                self._job_broke_worker(timed_out=True)
                break
            except WorkerBroken:
                self._job_broke_worker(timed_out=False)
                break
            kind = frame.get("t")
            if kind == "ask":
                self._answer(frame)
            elif kind == "ans" and want_answer is not None and frame.get("id") == want_answer:
                return frame.get("body")
            elif kind == "done":
                self._finish_with(frame)
            elif kind == "out" and self._on_out is not None:
                self._on_out(base64.b64decode(frame.get("data") or ""), bool(frame.get("eof")))
        if want_answer is not None:
            raise CallEnded(self._done)
        return None

    def _answer(self, frame: dict[str, Any]) -> None:
        try:
            reply = self._on_message(frame.get("body")) if self._on_message else None
        except BaseException:
            # The trusted side failed: end the job, keep the worker, re-raise.
            self._send({"t": "abort"})
            while self._done is None:
                self._pump(None)
            raise
        ask_id = frame.get("id")
        if type(ask_id) is not int:
            self._refuse()  # the host echoes only ids of its own shape
            return
        self._send({"t": "ans", "id": ask_id, "body": reply})

    def _send(self, frame: dict[str, Any]) -> None:
        try:
            data = encode_frame({**frame, "n": self._nonce})
        except FrameError:
            self._refuse()
            return
        try:
            with self._send_lock:
                if self._worker is None:
                    return
                self._worker.send_bytes(data, self._deadline)
        except WorkerTimeout:
            self._job_broke_worker(timed_out=True)  # past the call's deadline, or not reading
        except SandboxError:
            self._job_broke_worker(timed_out=False)

    # -- ending

    def _refuse(self) -> None:
        """A frame for this job is over the channel's limits: nothing of it was sent (the
        stream is in step), so the job is aborted, the worker kept, and the job blamed."""
        if REFUSED_FRAME not in self._violations:
            self._violations.append(REFUSED_FRAME)
        self._send({"t": "abort"})

    def _release_on_failure(self) -> None:
        """Whatever went wrong on the host's side, the worker goes back (replaced)."""
        if self._worker is not None:
            log.warning("a sandbox call failed on the host's side; its worker is replaced")
            self._close(healthy=False)
        if self._done is None:  # later calls on this session answer at once
            self._done = CallResult(backend=self._backend.name, wall_s=time.monotonic() - self._started_at)

    def _job_broke_worker(self, timed_out: bool) -> None:
        """The worker of a started job stopped answering or broke protocol: the job's doing."""
        worker = self._worker
        tail = worker.stderr_text() if worker is not None else ""
        log.warning("sandbox worker failed while its job ran (%s); attributed to the job. stderr: %s",
                    "no answer in time" if timed_out else "broken stream", tail)
        self._close(healthy=False)
        self._done = CallResult(
            backend=self._backend.name,
            wall_s=time.monotonic() - self._started_at,
            killed_by="timeout" if timed_out else None,
            violations=[*self._violations, *([] if timed_out else [BROKEN_CHANNEL])],
        )

    def _finish_with(self, frame: dict[str, Any]) -> None:
        assert self._worker is not None
        if "infrastructure_error" in frame:
            # The job had started: whatever broke its supervisor is counted against it.
            log.warning("sandbox supervisor failed while its job ran; attributed to the job. stderr: %s",
                        self._worker.stderr_text())
            self._close(healthy=False)
            self._done = CallResult(backend=self._backend.name, wall_s=time.monotonic() - self._started_at,
                                    violations=[*self._violations, SUPERVISOR_FAILED])
            return
        try:
            done = decode_done(frame, self._backend.name)
        except (ValueError, TypeError):
            self._job_broke_worker(timed_out=False)
            return
        done.violations = [*self._violations, *(v for v in done.violations if v not in self._violations)]
        self._done = done
        healthy = self._backend.job_ended(self._worker, done) and not frame.get("retire")
        self._close(healthy=healthy)

    def _close(self, healthy: bool) -> None:
        with self._send_lock:  # no peer's relay is half-written to a worker given back
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.jobs += 1
            if not healthy:
                worker.kill()
            self._pool.release(worker, healthy)

    def feed(self, data: bytes, eof: bool) -> None:
        """Relay bytes (and the end of them) to a running stream job's stdin. Called from
        the peer's thread; a worker that cannot take them is killed, which the thread
        pumping this session then reports as the job's broken channel."""
        frame = encode_frame({"t": "in", "n": self._nonce, "data": base64_text(data), "eof": eof})
        with self._send_lock:
            if self._worker is None:
                return
            try:
                self._worker.send_bytes(frame, self._deadline)
            except SandboxError:
                self._worker.kill()

    # -- the CallSession interface

    def request(self, message: Any, timeout_s: float | None = None) -> Any:
        with self._lock, self._guarded():
            if self._done is not None:
                raise CallEnded(self._done)
            request_id = next(self._ids)
            self._send({"t": "req", "id": request_id, "body": message})
            deadline = time.monotonic() + timeout_s if timeout_s is not None else None
            try:
                return self._pump(request_id, deadline)
            except WorkerTimeout:
                # Only this request ran out of time: kill the job, keep the warm worker.
                self._send({"t": "abort"})
                self._pump(None)
                raise RequestTimeout(self._done) from None

    def request_parts(self, messages: list[Any], timeout_s: float) -> tuple[list[Any], CallEnded | None]:
        """Several requests in one message, `{"parts": [...], "id": n}`, to a function that answers
        each part with an answer frame of its own, in order, then closes with one more
        (verifiers/math/inside/check.py). Each part gets `timeout_s` from the answer before it
        (the first from the send): a hang costs one timeout, as with one request at a time.
        Returns the answers that came, in order, and what ended the call before the rest (a
        RequestTimeout: the part after the last answer ran out of time; CallEnded: it died), or None."""
        with self._lock, self._guarded():
            if self._done is not None:
                return [], CallEnded(self._done)
            request_id = next(self._ids)
            self._send({"t": "req", "id": request_id, "body": {"parts": messages, "id": request_id}})
            answers: list[Any] = []
            try:
                while len(answers) <= len(messages):  # the parts' answers, then the closing one
                    answers.append(self._pump(request_id, time.monotonic() + timeout_s))
            except WorkerTimeout:
                self._send({"t": "abort"})
                self._pump(None)
                return answers, RequestTimeout(self._done)
            except CallEnded as exc:
                return answers, exc
            return answers[:-1], None

    def wait(self) -> CallResult:
        with self._lock, self._guarded():
            self._pump(None)
            assert self._done is not None
            return self._done

    def finish(self) -> CallResult:
        with self._lock, self._guarded():
            if self._done is None:
                self._send({"t": "finish"})
        return self.wait()

    def abort(self) -> CallResult:
        with self._lock, self._guarded():
            if self._done is None:
                self._send({"t": "abort"})
        return self.wait()

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """Never leak the worker: an exception out of the session (a failing message
        handler included, once its job has ended) leaves no worker taken."""
        try:
            yield
        except BaseException:
            self._release_on_failure()
            raise


class WarmWorkerBackend(Sandbox):
    """Sandbox semantics over pools of warm workers; backends supply the workers."""

    def __init__(self, workers: int | None, timings: WorkerTimings) -> None:
        self.workers = workers or os.cpu_count() or 2
        self.timings = timings
        self._pools: dict[str, WorkerPool] = {}
        self._lock = threading.Lock()

    # -- hooks

    @abc.abstractmethod
    def start_worker(self, preload: tuple[str, ...]) -> WarmWorker:
        """A new worker that has said `ready` (SandboxError with a cause otherwise)."""

    def retire_worker(self, worker: WarmWorker) -> None:
        worker.kill()

    def job_ended(self, worker: WarmWorker, result: CallResult) -> bool:
        """After a job's `done`: may this worker take another job?"""
        return True

    # -- pools

    def pool(self, name: str, preload: tuple[str, ...]) -> WorkerPool:
        with self._lock:
            found = self._pools.get(name)
            if found is None:
                found = self._pools[name] = WorkerPool(self, preload, self.workers)
            elif found.preload != preload:
                raise ValueError(f"pool {name!r} already exists with preload {found.preload}")
            return found

    def warm(self, pool: str, preload: tuple[str, ...] = ()) -> None:
        self.pool(pool, preload).warm()

    def _start(self, spec: dict[str, Any], limits: Limits, pool: str, preload: tuple[str, ...],
               on_message: MessageHandler | None) -> WorkerCallSession:
        """Send the job to a worker and wait until it has started. A worker that fails
        before that is the infrastructure's failure: one retry on a fresh worker."""
        the_pool = self.pool(pool, preload)
        for attempt in range(1, START_ATTEMPTS + 1):
            nonce = secrets.token_hex(NONCE_BYTES)
            try:
                job = encode_frame({"t": "job", "spec": {**spec, "nonce": nonce, "limits": limits.to_dict()}})
            except FrameError:
                raise PayloadRefused("the job's payload is over the channel's size or nesting limits") from None
            worker = the_pool.acquire(self.timings.acquire_timeout_s)
            session = WorkerCallSession(self, the_pool, worker, nonce, limits, on_message)
            try:
                failure = self._hand_over(worker, session, job)
            except BaseException:
                the_pool.release(worker, healthy=False)
                raise
            if failure is None:
                return session
            log.warning("sandbox worker failed before its job started (attempt %d): %s; stderr: %s",
                        attempt, failure, worker.stderr_text())
            the_pool.release(worker, healthy=False)
        raise SandboxError("sandbox workers failed before the job started", cause=failure.cause)

    def _hand_over(self, worker: WarmWorker, session: WorkerCallSession, job: bytes) -> SandboxError | None:
        """Send the (encoded) job and wait for `started`; the failure when it did not start."""
        deadline = time.monotonic() + self.timings.start_timeout_s
        try:
            worker.send_bytes(job, deadline)
            frame = session._next_frame(deadline)
        except SandboxError as exc:
            return exc
        if frame.get("t") == "started":
            return None
        if "infrastructure_error" in frame:
            return SandboxError("the sandbox could not set up the job", cause="job_setup_failed")
        return WorkerBroken("the worker answered a job with something else")

    # -- the Sandbox interface

    def run(self, job: Job) -> JobResult:
        spec = {
            "mode": "exec",
            "argv": job.command,
            "files": encode_files(job.files),
            "stdin": base64_text(job.stdin),
            "env": job.env,
        }
        return self._start(spec, job.limits, "exec", (), None).wait()

    def interact(self, first: Job, second: Job) -> tuple[JobResult, JobResult]:
        """Both jobs at once on workers of two pools (taken in this order, so that
        concurrent pairs cannot deadlock), each one's stdout relayed to the other's stdin
        through this host as it comes. Each runs to its own end under its own limits."""
        sessions: list[WorkerCallSession] = []
        try:
            for job, pool in zip((first, second), INTERACT_POOLS, strict=True):
                spec = {"mode": "stream", "argv": job.command, "files": encode_files(job.files),
                        "stdin": base64_text(job.stdin), "env": job.env}
                sessions.append(self._start(spec, job.limits, pool, (), None))
        except BaseException:
            for started in sessions:
                started.abort()
            raise
        one, other = sessions
        one._on_out, other._on_out = other.feed, one.feed
        results: list[JobResult | BaseException] = []

        def pump_other() -> None:
            try:
                results.append(other.wait())
            except BaseException as exc:  # handed to the caller's thread
                results.append(exc)

        thread = threading.Thread(target=pump_other, daemon=True, name="assay-interact")
        thread.start()
        try:
            first_result = one.wait()
        except BaseException:
            other._send({"t": "abort"})
            raise
        finally:
            thread.join()
        if isinstance(results[0], BaseException):
            raise results[0]
        return first_result, results[0]

    def open(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = ()) -> CallSession:
        return self._start({"mode": "call", "target": target, "payload": payload}, limits, pool, preload, None)

    def call(self, target: str, payload: Any, limits: Limits, *, pool: str = "default",
             preload: tuple[str, ...] = (), on_message: MessageHandler | None = None) -> CallResult:
        spec = {"mode": "call", "target": target, "payload": payload}
        return self._start(spec, limits, pool, preload, on_message).wait()

    def close(self) -> None:
        with self._lock:
            for found in self._pools.values():
                found.close()
            self._pools.clear()

    def pool_names(self) -> list[str]:
        return sorted(self._pools)

    def workers_started(self, pool: str) -> int:
        """How many workers `pool` has started so far: a replaced worker counts again."""
        with self._lock:
            found = self._pools.get(pool)
        return found.started if found is not None else 0

    def pool_stats(self) -> dict[str, dict[str, int]]:
        with self._lock:
            pools = dict(self._pools)
        return {name: pool.stats() for name, pool in pools.items()}


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode_files(files: dict[str, bytes]) -> dict[str, str]:
    return {name: base64_text(data) for name, data in files.items()}


def decode_done(frame: dict[str, Any], backend: str) -> CallResult:
    """Turn a worker's `done` frame into a CallResult."""
    outcome = frame.get("outcome") or {}
    if not isinstance(outcome, dict):
        raise ValueError("malformed outcome")
    return CallResult(
        exit_code=frame.get("exit_code"),
        signal=frame.get("signal"),
        stdout=base64.b64decode(frame.get("stdout") or ""),
        stderr=base64.b64decode(frame.get("stderr") or ""),
        stdout_truncated=bool(frame.get("stdout_truncated")),
        stderr_truncated=bool(frame.get("stderr_truncated")),
        wall_s=float(frame.get("wall_s") or 0.0),
        cpu_s=float(frame.get("cpu_s") or 0.0),
        peak_memory_mb=float(frame.get("peak_memory_mb") or 0.0),
        killed_by=frame.get("killed_by") if frame.get("killed_by") in KILL_REASONS else None,
        violations=[str(v)[:VIOLATION_CHARS] for v in (frame.get("violations") or [])][:MAX_VIOLATIONS],
        backend=backend,
        value=outcome.get("value"),
        returned=outcome.get("t") == "result",
        raised={"type": str(outcome.get("type")), "message": str(outcome.get("message"))}
        if outcome.get("t") == "raised"
        else None,
    )
