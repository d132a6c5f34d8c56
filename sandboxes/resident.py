"""Resident servers: long-lived sandboxed calls that answer many requests in turn.

(Not to be confused with a `CallSession`, the host's handle on one running call: a
resident server is such a call kept open, and reused, across many verifications.)

Forking a fresh sandboxed process costs several milliseconds, more than judging a group
takes for verifiers whose sandboxed code is *our own* code working on data (parsing a
math answer, replaying a tool trace) rather than candidate code. Such a verifier may let
one sandboxed process serve request after request: nothing in a request can run code, and
each request is judged from scratch. Servers are still recycled by age and request
count, and dropped on any failure; callers fall back to a fresh process per call, which
also pins a kill on the input that caused it. Never use this for candidate code.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandboxes.base import CallEnded, CallSession, Limits, RequestTimeout, Sandbox, SandboxError

log = logging.getLogger(__name__)

# Warmed servers are replaced in the background once this share of their age has passed,
# checked every REFRESH_TICK of it (at least REFRESH_MIN_TICK_S apart).
REFRESH_AGE = 0.8
REFRESH_TICK = 0.1
REFRESH_MIN_TICK_S = 0.05
# Rounds of warming at start: what failed to start in the first (a worker's start timed out
# on a loaded machine) is tried once more.
WARM_TRIES = 2


@dataclass(frozen=True)
class ResidentSpec:
    target: str
    pool: str
    preload: tuple[str, ...]
    # A server's limits cover its whole life; it is retired well before they run out.
    limits: Limits
    max_age_s: float = 60.0
    max_requests: int = 500
    # How long a caller waits for a busy server before paying for a fresh process.
    wait_s: float = 2.0
    # The target answers `{"parts": [...], "id": n}` with one answer frame per part, then a closing
    # one (`CallSession.request_parts`): `answer_all` then sends a server several requests at once.
    parts: bool = False


@dataclass
class _Served:
    session: CallSession
    opened: float
    requests: int = 0


class ResidentServers:
    """Up to `size` resident servers of one spec in one sandbox, each used by one thread at a time."""

    def __init__(self, sandbox: Sandbox, spec: ResidentSpec, size: int) -> None:
        self.sandbox = sandbox
        self.spec = spec
        self._size = size
        self._idle: queue.LifoQueue[_Served] = queue.LifoQueue()
        self._open = 0
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    def request(self, payload: Any, timeout_s: float | None = None) -> Any | None:
        """The server's answer, or None when no server could answer (use a fresh
        process instead). CallEnded (RequestTimeout included) means this payload killed
        the server or ran out of time: the server is dropped and the error re-raised."""
        served = self._take()
        if served is None:
            return None
        try:
            value = served.session.request(payload, timeout_s=timeout_s)
        except CallEnded:
            self._drop(served)
            raise
        except SandboxError:
            self._drop(served)
            return None
        served.requests += 1
        self._give_back(served)
        return value

    def request_parts(self, payloads: list[Any], timeout_s: float) -> tuple[list[Any], CallEnded | None] | None:
        """Several payloads in one message to one server (`CallSession.request_parts`, where the
        backend's sessions have it): the answers that came, in order, and what ended the server
        before the rest (it is then dropped), or None when no server took them."""
        served = self._take()
        if served is None:
            return None
        parts = getattr(served.session, "request_parts", None)
        if parts is None:
            self._give_back(served)
            return None
        try:
            answers, ended = parts(payloads, timeout_s)
        except SandboxError:
            self._drop(served)
            return None
        served.requests += len(payloads)
        if ended is None:
            self._give_back(served)
        else:
            self._drop(served)
        return answers, ended

    def warm(self) -> None:
        """Open every server now, all at once, so that no request waits for one to start.
        A server that fails to open is left to the first request (it opens what is missing).
        From then on idle servers are recycled in the background before they wear out, so
        that no request pays for a recycling (or for a worker its recycling replaces)."""
        opening = [threading.Thread(target=self._open_idle, name="assay-resident-warm", daemon=True)
                   for _ in range(self._size)]
        for thread in opening:
            thread.start()
        for thread in opening:
            thread.join()
        with self._lock:
            if self._refresher is None and not self._closed:
                self._refresher = threading.Thread(target=self._refresh_loop, name="assay-resident-refresh",
                                                   daemon=True)
                self._refresher.start()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(max(REFRESH_MIN_TICK_S, self.spec.max_age_s * REFRESH_TICK)):
            self._refresh()

    def _refresh(self) -> None:
        """Replace the idle servers that are near their age (busy ones are not touched)."""
        now, kept, replaced = time.monotonic(), [], 0
        while True:
            try:
                served = self._idle.get_nowait()
            except queue.Empty:
                break
            if now - served.opened > self.spec.max_age_s * REFRESH_AGE or self._worn(served, now):
                self._retire(served)
                replaced += 1
            else:
                kept.append(served)
        for served in kept:
            self._idle.put(served)
        for _ in range(replaced):
            self._open_idle()

    def full(self) -> bool:
        """Whether every server is open."""
        with self._lock:
            return self._open >= self._size

    def _open_idle(self) -> None:
        served = self._open_one()
        if served is not None:
            self._give_back(served)

    def _worn(self, served: _Served, now: float) -> bool:
        return now - served.opened > self.spec.max_age_s or served.requests >= self.spec.max_requests

    def _take(self) -> _Served | None:
        while True:
            try:
                served = self._idle.get_nowait()
            except queue.Empty:
                served = self._open_one()
                if served is None:
                    try:
                        served = self._idle.get(timeout=self.spec.wait_s)
                    except queue.Empty:
                        return None
            if not self._worn(served, time.monotonic()):
                return served
            self._retire(served)

    def _open_one(self) -> _Served | None:
        with self._lock:
            if self._closed or self._open >= self._size:
                return None
            self._open += 1
        spec = self.spec
        try:
            session = self.sandbox.open(spec.target, {}, spec.limits, pool=spec.pool, preload=spec.preload)
        except SandboxError:
            with self._lock:
                self._open -= 1
            return None
        return _Served(session, time.monotonic())

    def _give_back(self, served: _Served) -> None:
        if self._closed or self._worn(served, time.monotonic()):
            self._retire(served)
        else:
            self._idle.put(served)

    def _retire(self, served: _Served) -> None:
        with contextlib.suppress(SandboxError):
            served.session.finish()
        with self._lock:
            self._open -= 1

    def _drop(self, served: _Served) -> None:
        with contextlib.suppress(SandboxError):
            served.session.abort()
        with self._lock:
            self._open -= 1

    def close(self) -> None:
        """Finish every idle server (busy ones are finished when given back)."""
        with self._lock:
            self._closed = True
        self._stop.set()
        while True:
            try:
                self._retire(self._idle.get_nowait())
            except queue.Empty:
                return


_registry: weakref.WeakKeyDictionary[Sandbox, dict[str, ResidentServers]] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def resident_servers(sandbox: Sandbox, spec: ResidentSpec) -> ResidentServers:
    """The sandbox's resident servers for `spec` (one set per sandbox and pool name)."""
    with _registry_lock:
        per_sandbox = _registry.setdefault(sandbox, {})
        found = per_sandbox.get(spec.pool)
        if found is None:
            found = per_sandbox[spec.pool] = ResidentServers(sandbox, spec, int(getattr(sandbox, "workers", 2)))
        return found


def warm_pools(sandbox: Sandbox, spec: ResidentSpec, fresh: Mapping[str, tuple[str, ...]]) -> None:
    """Open the resident servers of `spec`, then start the workers of the `fresh` pools (name
    -> preload), and return when they are up: what they preload is then read before any
    request, not inside one. The servers come first and alone (requests use them first;
    fewer workers starting at once start sooner); what failed to start is tried once more,
    then logged and left to the first request."""
    servers = resident_servers(sandbox, spec)
    failed: dict[str, SandboxError] = {}
    for _ in range(WARM_TRIES):
        servers.warm()
        failed = _warm_pools(sandbox, fresh)
        if not failed and servers.full():
            return
    for pool, exc in failed.items():
        log.warning("could not warm sandbox pool %s: %s", pool, exc)
    if not servers.full():
        log.warning("could not open every resident server of pool %s", spec.pool)


def _warm_pools(sandbox: Sandbox, pools: Mapping[str, tuple[str, ...]]) -> dict[str, SandboxError]:
    failed: dict[str, SandboxError] = {}

    def warm(pool: str, preload: tuple[str, ...]) -> None:
        try:
            sandbox.warm(pool, preload)
        except SandboxError as exc:
            failed[pool] = exc

    starting = [threading.Thread(target=warm, args=item, name="assay-warm", daemon=True) for item in pools.items()]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    return failed


def close_resident_servers(sandbox: Sandbox, pool: str) -> None:
    with _registry_lock:
        found = _registry.get(sandbox, {}).pop(pool, None)
    if found is not None:
        found.close()


@dataclass(frozen=True)
class Answer:
    """What became of one request: the server's value, or how the request ended it."""

    value: Any = None
    # The request ran out of its time (the process that ran it was ended).
    timed_out: RequestTimeout | None = None
    # The request's fresh process died on it (a resource limit): pinned on this request.
    died: CallEnded | None = None


def answer_all(sandbox: Sandbox, spec: ResidentSpec, requests: Sequence[Any], *, timeout_s: float,
               fresh_limits: Callable[[int], Limits], fresh_pool: str, warm: bool = True) -> list[Answer]:
    """Answer every request, in order: on the resident servers of `spec` first (unless not
    `warm`), then what no server could answer in fresh processes of `fresh_pool`, one
    process for the rest until one dies; a death is pinned on the request it ran, and the
    requests after it go to the next fresh process."""
    answers: list[Answer | None] = [None] * len(requests)
    pending = list(range(len(requests)))
    if warm:
        servers = resident_servers(sandbox, spec)
        rest, pending = _in_one_message(servers, requests, pending, answers, timeout_s)
        for index in pending:
            try:
                value = servers.request(requests[index], timeout_s=timeout_s)
            except RequestTimeout as exc:
                answers[index] = Answer(timed_out=exc)
                continue
            except CallEnded:  # the server's own limits may have ended it: answer afresh
                value = None
            if value is None:
                rest.append(index)
            else:
                answers[index] = Answer(value)
        pending = rest
    while pending:
        session = sandbox.open(spec.target, None, fresh_limits(len(pending)), pool=fresh_pool, preload=spec.preload)
        pending = _answer_in(session, requests, pending, answers, timeout_s)
    return answers  # type: ignore[return-value]


def _in_one_message(servers: ResidentServers, requests: Sequence[Any], pending: list[int],
                    answers: list[Answer | None], timeout_s: float) -> tuple[list[int], list[int]]:
    """Several requests to one resident server in one message, each still with its own time
    budget. Returns (requests for a fresh process, requests for the servers one at a time):
    after a part timed out or ended the server, the parts after it go on as single requests."""
    if len(pending) < 2 or not servers.spec.parts:
        return [], pending
    got = servers.request_parts([requests[i] for i in pending], timeout_s)
    if got is None:
        return [], pending
    values, ended = got
    fresh = [index for index, value in zip(pending, values, strict=False) if value is None]  # too big to send back
    for index, value in zip(pending, values, strict=False):
        if value is not None:
            answers[index] = Answer(value)
    left = pending[len(values):]
    if isinstance(ended, RequestTimeout) and left:
        answers[left[0]] = Answer(timed_out=ended)
        left = left[1:]
    elif ended is not None and left:  # the server died on this part (its own limits may have ended it): afresh
        fresh.append(left[0])
        left = left[1:]
    return fresh, left


def _answer_in(session: CallSession, requests: Sequence[Any], pending: list[int],
               answers: list[Answer | None], timeout_s: float) -> list[int]:
    """Answer requests in one fresh process until done or it dies; return the rest."""
    for position, index in enumerate(pending):
        try:
            answers[index] = Answer(session.request(requests[index], timeout_s=timeout_s))
        except RequestTimeout as exc:
            answers[index] = Answer(timed_out=exc)
            return pending[position + 1:]
        except CallEnded as exc:
            answers[index] = Answer(died=exc)
            return pending[position + 1:]
    session.finish()
    return []
