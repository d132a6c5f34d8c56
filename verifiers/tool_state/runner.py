"""Host side of the sandboxed replay: warm replay sessions first, fresh processes as fallback.

Forking a fresh sandboxed process for each group costs more than replaying the group
(several milliseconds against well under one for ten calls). The replay runs only our
own code on data, never candidate code, and every judgement builds its environment
afresh from the task, so one sandboxed process may judge many groups in turn without
one response being able to affect another's judgement. Sessions are still recycled by
age and request count, and any failure (a kill by a limit, a crash, a closed sandbox)
drops the session; the caller then falls back to one fresh process per call, which also
pins a kill on the response that caused it.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from sandboxes.base import CallSession, Limits, Sandbox, SandboxError

PRELOAD = ("verifiers.tool_state.replay",)
CALL_TARGET = "verifiers.tool_state.replay:run"
SERVE_TARGET = "verifiers.tool_state.replay:serve"
CALL_POOL = "tool_state"
SERVE_POOL = "tool_state_serve"
# One-shot calls: our replay on bounded input, generous per call.
CALL_LIMITS = Limits(wall_s=10.0, cpu_s=10.0, memory_mb=512, processes=4, output_bytes=100_000)
# A session's limits cover its whole life; it is retired well before they run out.
SESSION_LIMITS = Limits(wall_s=180.0, cpu_s=120.0, memory_mb=512, processes=4, output_bytes=100_000)
SESSION_MAX_AGE_S = 60.0
SESSION_MAX_REQUESTS = 500
# How long a group waits for a busy session before paying for a fresh process.
SESSION_WAIT_S = 2.0


@dataclass
class _Served:
    session: CallSession
    opened: float
    requests: int = 0

    def worn(self, now: float) -> bool:
        return now - self.opened > SESSION_MAX_AGE_S or self.requests >= SESSION_MAX_REQUESTS


class ReplaySessions:
    """Up to `size` warm replay sessions in one sandbox, each used by one thread at a time."""

    def __init__(self, sandbox: Sandbox, size: int) -> None:
        self._sandbox = sandbox
        self._size = size
        self._idle: queue.LifoQueue[_Served] = queue.LifoQueue()
        self._open = 0
        self._closed = False
        self._lock = threading.Lock()

    def request(self, payload: dict[str, Any]) -> Any | None:
        """The replay's answer, or None when no session could answer (use the fallback)."""
        served = self._take()
        if served is None:
            return None
        try:
            value = served.session.request(payload)
        except SandboxError:
            self._drop(served)
            return None
        served.requests += 1
        self._give_back(served)
        return value

    def _take(self) -> _Served | None:
        while True:
            try:
                served = self._idle.get_nowait()
            except queue.Empty:
                served = self._open_one()
                if served is None:
                    try:
                        served = self._idle.get(timeout=SESSION_WAIT_S)
                    except queue.Empty:
                        return None
            if not served.worn(time.monotonic()):
                return served
            self._retire(served)

    def _open_one(self) -> _Served | None:
        with self._lock:
            if self._open >= self._size:
                return None
            self._open += 1
        try:
            session = self._sandbox.open(SERVE_TARGET, {}, SESSION_LIMITS, pool=SERVE_POOL, preload=PRELOAD)
        except SandboxError:
            with self._lock:
                self._open -= 1
            return None
        return _Served(session, time.monotonic())

    def _give_back(self, served: _Served) -> None:
        if self._closed or served.worn(time.monotonic()):
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
        """Finish every idle session (busy ones are finished when given back)."""
        self._closed, self._size = True, 0
        while True:
            try:
                self._retire(self._idle.get_nowait())
            except queue.Empty:
                return


_sessions: weakref.WeakKeyDictionary[Sandbox, ReplaySessions] = weakref.WeakKeyDictionary()
_sessions_lock = threading.Lock()


def sessions_for(sandbox: Sandbox) -> ReplaySessions:
    with _sessions_lock:
        found = _sessions.get(sandbox)
        if found is None:
            size = int(getattr(sandbox, "workers", 2))
            found = _sessions[sandbox] = ReplaySessions(sandbox, size)
        return found


def close_sessions(sandbox: Sandbox) -> None:
    with _sessions_lock:
        found = _sessions.pop(sandbox, None)
    if found is not None:
        found.close()
