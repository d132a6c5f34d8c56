"""Environment sessions for multi-turn rollouts of `tool_state` tasks.

`POST /v1/envs` opens a session on a task (inline or registered) and returns its id and
the tool schemas; `POST /v1/envs/{id}/step` runs one call and returns the tool's reply;
`POST /v1/envs/{id}/finish` submits the final message and verifies the server-held
trace through the engine exactly as `POST /v1/verify` would (same result, one audit
record). The trainer never sends the trace back, so it cannot be edited in between.

Steps run the domain pack here, on the trusted side: it is our own code operating on
plain JSON data (tools are looked up in a table; nothing from the agent is evaluated).
The verdict does not trust these steps either: `finish` replays the recorded calls in
the sandbox like any other response.

Sessions live in this process's memory, expire after an idle time, and are limited per
API key and in total. Limits are settings: ASSAY_ENV_TTL_S, ASSAY_ENV_MAX_PER_KEY and
ASSAY_ENV_MAX_SESSIONS.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.auth import Caller, require_scope
from service.config import Settings
from service.schemas import ErrorOut, TaskRef, UnicodeText, VerifyRequest, VerifyResult
from verifiers.tool_state.env import Environment
from verifiers.tool_state.packs import get_pack
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.trace import MAX_ARGS_CHARS, MAX_TOOL_NAME, dumps_trace

VERIFIER = "tool_state"
# A finished session keeps its result this long, so that a retried finish gets the
# same answer (and no second record) instead of a 404.
FINISHED_KEEP_S = 300.0
MAX_SESSION_STATE_CHARS = 1_000_000
# Room kept in the response limit for the final message and the trace's envelope.
FINISH_ROOM_CHARS = 2000

router = APIRouter(prefix="/v1/envs", tags=["environments"])
_errors = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut},
           409: {"model": ErrorOut}, 422: {"model": ErrorOut}, 429: {"model": ErrorOut}}


# ------------------------------------------------------------------------ models


class _Strict(UnicodeText):
    model_config = ConfigDict(extra="forbid")


class OpenEnv(TaskRef):
    verifier: str = Field(VERIFIER, description="Only `tool_state` tasks have environments.",
                          json_schema_extra={"enum": [VERIFIER]})
    task: dict[str, Any] | None = Field(None, description="A `tool_state` task inline.")

    @model_validator(mode="after")
    def _tool_state_only(self) -> OpenEnv:
        if self.verifier != VERIFIER:
            raise ValueError(f"environments exist only for the {VERIFIER!r} verifier")
        return self


class OpenedEnv(BaseModel):
    env_id: str
    environment: str
    actor: str = Field(description="The user the agent acts as; tools take identity from the session, not arguments.")
    tools: list[dict[str, Any]] = Field(description="Function schemas of the tools this task allows.")
    max_steps: int
    expires_in_s: float = Field(description="Idle time after which the session is dropped.")


class StepRequest(_Strict):
    tool: str = Field(min_length=1, max_length=MAX_TOOL_NAME)
    args: dict[str, Any] = {}


class StepResult(BaseModel):
    ok: bool
    result: Any = None
    error: str | None = None
    step: int = Field(description="Index of this call in the trace.")
    steps_left: int


class FinishRequest(_Strict):
    final_message: str = Field(description="The agent's final message to the user.")
    request_id: str | None = Field(None, max_length=200)


# ------------------------------------------------------------------------ sessions


@dataclass
class Session:
    id: str
    key_id: str
    open: OpenEnv
    task: ToolStateTask
    env: Environment
    calls: list[dict[str, Any]] = field(default_factory=list)
    trace_chars: int = 0
    touched: float = 0.0
    finishing: bool = False
    result: VerifyResult | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionStore:
    """In-memory sessions with idle expiry and limits. Thread-safe."""

    def __init__(self, ttl_s: float, max_per_key: int, max_sessions: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_per_key, self.max_sessions, self.clock = ttl_s, max_per_key, max_sessions, clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionStore:
        return cls(settings.env_ttl_s, settings.env_max_per_key, settings.env_max_sessions)

    def _expired(self, session: Session, now: float) -> bool:
        keep = FINISHED_KEEP_S if session.result is not None else self.ttl_s
        return now - session.touched > keep

    def _sweep(self, now: float) -> None:
        for sid in [sid for sid, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[sid]

    def add(self, key_id: str, opened: OpenEnv, task: ToolStateTask) -> Session:
        with self._lock:
            now = self.clock()
            self._sweep(now)
            live = [s for s in self._sessions.values() if s.result is None]
            if sum(s.key_id == key_id for s in live) >= self.max_per_key:
                raise HTTPException(429, f"this API key has {self.max_per_key} open environment sessions (the "
                                         "limit); finish or delete one first")
            if len(live) >= self.max_sessions:
                raise HTTPException(429, f"the service holds {self.max_sessions} open environment sessions (the "
                                         "limit); retry later", headers={"Retry-After": "5"})
            env = Environment.start(get_pack(task.environment), task.initial(), task.actor, task.allowed_tools)
            session = Session(f"env_{secrets.token_urlsafe(16)}", key_id, opened, task, env, touched=now)
            self._sessions[session.id] = session
            return session

    def get(self, env_id: str, key_id: str) -> Session:
        with self._lock:
            now = self.clock()
            session = self._sessions.get(env_id)
            # Another key's session reads as missing: ids are not an oracle.
            if session is None or session.key_id != key_id or self._expired(session, now):
                raise HTTPException(404, f"no environment session {env_id[:64]!r} (finished long ago, expired "
                                         "or never opened)")
            session.touched = now
            return session

    def remove(self, env_id: str) -> None:
        with self._lock:
            self._sessions.pop(env_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def sessions(request: Request) -> SessionStore:
    state = request.app.state
    store = getattr(state, "env_sessions", None)
    if store is None:
        with _create_lock:
            store = getattr(state, "env_sessions", None)
            if store is None:
                store = state.env_sessions = SessionStore.from_settings(state.engine.settings)
    return store


_create_lock = threading.Lock()


# ----------------------------------------------------------------------- routes


@router.post("", response_model=OpenedEnv, status_code=201, responses=_errors)
async def open_env(body: OpenEnv, request: Request, caller: Caller = Depends(require_scope("reward"))) -> OpenedEnv:
    """Open a session on a `tool_state` task: the environment starts in the task's initial state."""
    resolved = request.app.state.engine.resolve(body)  # TaskInvalid -> 422, unknown task_id -> 404
    task = resolved.task
    assert isinstance(task, ToolStateTask)
    # Sessions hold their state in this process's memory: bound what one may pin.
    state_chars = len(json.dumps(task.initial()))
    if state_chars > MAX_SESSION_STATE_CHARS:
        raise HTTPException(422, f"task.initial_state: {state_chars} characters as JSON; environment sessions "
                                 f"take at most {MAX_SESSION_STATE_CHARS}")
    store = sessions(request)
    session = store.add(caller.key_id, body, task)
    return OpenedEnv(env_id=session.id, environment=task.environment, actor=task.actor,
                     tools=get_pack(task.environment).schemas(task.allowed_tools), max_steps=task.max_calls,
                     expires_in_s=store.ttl_s)


@router.post("/{env_id}/step", response_model=StepResult, responses=_errors)
async def step(env_id: str, body: StepRequest, request: Request,
               caller: Caller = Depends(require_scope("reward"))) -> StepResult:
    """Run one tool call as the session's actor and return the tool's reply."""
    if len(json.dumps(body.args)) > MAX_ARGS_CHARS:
        raise HTTPException(422, f"args: longer than {MAX_ARGS_CHARS} characters")
    session = sessions(request).get(env_id, caller.key_id)
    with session.lock:
        if session.finishing or session.result is not None:
            raise HTTPException(409, "the session is finished")
        if len(session.calls) >= session.task.max_calls:
            raise HTTPException(409, f"the task allows at most {session.task.max_calls} calls; finish the session")
        call = {"tool": body.tool, "args": body.args}
        # The finished trace goes through /v1/verify's response limit: refuse the step that
        # would make the session impossible to finish rather than fail at the end.
        size = len(json.dumps(call, separators=(",", ":"), ensure_ascii=False)) + 1
        limit = getattr(request.app.state.engine.settings, "max_response_chars", None)
        if limit is not None and session.trace_chars + size > limit - FINISH_ROOM_CHARS:
            raise HTTPException(409, f"the trace would exceed the service's response limit ({limit} characters); "
                                     "finish the session")
        # Recorded as sent, so the finish trace replays to exactly these events.
        session.calls.append(call)
        session.trace_chars += size
        event = session.env.step(body.tool, body.args)
        steps_left = session.task.max_calls - len(session.calls)
    reply = event.reply()
    return StepResult(ok=reply["ok"], result=reply.get("result"), error=reply.get("error"), step=event.index,
                      steps_left=steps_left)


@router.post("/{env_id}/finish", response_model=VerifyResult, responses=_errors)
async def finish(env_id: str, body: FinishRequest, request: Request,
                 caller: Caller = Depends(require_scope("reward"))) -> VerifyResult:
    """Verify the server-held trace with the final message: the same result and record as /v1/verify."""
    session = sessions(request).get(env_id, caller.key_id)
    with session.lock:
        if session.result is not None:
            return session.result  # a retried finish: same answer, no second record
        if session.finishing:
            raise HTTPException(409, "the session is being finished by another request")
        session.finishing = True
        calls = list(session.calls)
    verify = VerifyRequest(verifier=VERIFIER, task=session.open.task, task_id=session.open.task_id,
                           response=dumps_trace(calls, body.final_message), request_id=body.request_id)
    try:
        result: VerifyResult = await request.app.state.engine.verify(verify, caller)
    except BaseException:
        with session.lock:
            session.finishing = False  # let the trainer retry (e.g. after a 503)
        raise
    with session.lock:
        session.result, session.finishing = result, False
    return result


@router.delete("/{env_id}", status_code=204, responses=_errors)
async def close_env(env_id: str, request: Request, caller: Caller = Depends(require_scope("reward"))) -> None:
    """Drop a session without verifying it (frees its slot)."""
    store = sessions(request)
    store.get(env_id, caller.key_id)
    store.remove(env_id)
