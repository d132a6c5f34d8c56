"""Environment sessions for multi-turn rollouts of `tool_state` tasks.

`POST /v1/envs` opens a session on a task (inline or registered) and returns its id and
the tool schemas; `POST /v1/envs/{id}/step` runs one call and returns the tool's reply;
`POST /v1/envs/{id}/finish` submits the final message and verifies the server-held
trace through the engine exactly as `POST /v1/verify` would (same result, one audit
record). The trainer never sends the trace back, so it cannot be edited in between.
Sessions live in the database (`service/env_sessions.py`): any replica serves any step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
from fastapi import APIRouter, Depends, HTTPException, Request

from service.auth import Caller, require_scope
from service.env_schemas import VERIFIER, FinishRequest, OpenedEnv, OpenEnv, StepRequest, StepResult
from service.env_sessions import (
    EnvSessionConflict,
    EnvSessionLimit,
    EnvSessionNotFound,
    EnvSessionStore,
    EnvSessionTooLarge,
)
from service.schemas import ErrorOut, VerifyRequest, VerifyResult
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.wire import MAX_ARGS_CHARS, dumps_trace

router = APIRouter(prefix="/v1/envs", tags=["environments"])
_errors = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut},
           409: {"model": ErrorOut}, 422: {"model": ErrorOut}, 429: {"model": ErrorOut}}
T = TypeVar("T")


@contextmanager
def _as_http(request: Request) -> Iterator[None]:
    try:
        yield
    except EnvSessionNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except EnvSessionConflict as exc:
        raise HTTPException(409, str(exc)) from exc
    except EnvSessionTooLarge as exc:
        raise HTTPException(422, str(exc)) from exc
    except EnvSessionLimit as exc:
        headers = {"Retry-After": str(request.app.state.engine.settings.retry_after_s)} if exc.retry_later else None
        raise HTTPException(429, str(exc), headers=headers) from exc


async def _run(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """A session-store call, off the event loop, its failures as HTTP errors."""
    with _as_http(request):
        return await anyio.to_thread.run_sync(fn, *args)


def _sessions(request: Request) -> EnvSessionStore:
    return request.app.state.env_sessions


async def _task(request: Request, opened: OpenEnv) -> ToolStateTask:
    """The session's task, resolved off the event loop (a registered task is read from the store)."""
    resolved = await anyio.to_thread.run_sync(request.app.state.engine.resolve, opened)
    task = resolved.task  # TaskInvalid -> 422, unknown task_id -> 404
    assert isinstance(task, ToolStateTask)
    return task


@router.post("", response_model=OpenedEnv, status_code=201, responses=_errors)
async def open_env(body: OpenEnv, request: Request, caller: Caller = Depends(require_scope("reward"))) -> OpenedEnv:
    """Open a session on a `tool_state` task: the environment starts in the task's initial state."""
    task = await _task(request, body)
    store = _sessions(request)
    row = await _run(request, store.open, caller.key_id, body.model_dump(mode="json"), task)
    return OpenedEnv(env_id=row.id, environment=task.environment, actor=task.actor,
                     tools=get_pack(task.environment).schemas(task.allowed_tools), max_steps=task.max_calls,
                     expires_in_s=store.ttl_s)


@router.post("/{env_id}/step", response_model=StepResult, responses=_errors)
async def step(env_id: str, body: StepRequest, request: Request,
               caller: Caller = Depends(require_scope("reward"))) -> StepResult:
    """Run one tool call as the session's actor and return the tool's reply."""
    if len(json.dumps(body.args)) > MAX_ARGS_CHARS:
        raise HTTPException(422, f"args: longer than {MAX_ARGS_CHARS} characters")
    store = _sessions(request)
    row = await _run(request, store.get, env_id, caller.key_id)
    done = await _run(request, store.step, env_id, caller.key_id, await _task(request, OpenEnv(**row.opened)),
                      body.tool, body.args)
    reply = done.event.reply()
    return StepResult(ok=reply["ok"], result=reply.get("result"), error=reply.get("error"), step=done.event.index,
                      steps_left=done.steps_left)


@router.post("/{env_id}/finish", response_model=VerifyResult, responses=_errors)
async def finish(env_id: str, body: FinishRequest, request: Request,
                 caller: Caller = Depends(require_scope("reward"))) -> VerifyResult:
    """Verify the server-held trace with the final message: the same result and record as /v1/verify."""
    store = _sessions(request)
    row = await _run(request, store.claim_finish, env_id, caller.key_id)
    if row.result is not None:
        return VerifyResult.model_validate(row.result)  # a retried finish: same answer, no second record
    opened = OpenEnv(**row.opened)
    verify = VerifyRequest(verifier=VERIFIER, task=opened.task, task_id=opened.task_id,
                           response=dumps_trace(row.calls, body.final_message), request_id=body.request_id,
                           evidence="feedback",  # what an agent loop shows the policy
                           run=body.run or opened.run)
    try:
        result: VerifyResult = await request.app.state.engine.verify(verify, caller)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _run(request, store.release, env_id)  # let the trainer retry (e.g. after a 503)
        raise
    await _run(request, store.finished, env_id, result.model_dump(mode="json"))
    return result


@router.delete("/{env_id}", status_code=204, responses=_errors)
async def close_env(env_id: str, request: Request, caller: Caller = Depends(require_scope("reward"))) -> None:
    """Drop a session without verifying it (frees its slot)."""
    await _run(request, _sessions(request).remove, env_id, caller.key_id)
