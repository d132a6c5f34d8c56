"""Environment sessions for multi-turn rollouts of `tool_state` tasks.

`POST /v1/envs` opens a session on a task (inline or registered) and returns its id and
the tool schemas; `POST /v1/envs/{id}/step` runs one call and returns the tool's reply;
`POST /v1/envs/{id}/finish` submits the final message and verifies the server-held
trace through the pipeline exactly as `POST /v1/verify` would (same result, one audit
record). The trainer never sends the trace back, so it cannot be edited in between.
Sessions live in the database (`service/env_sessions.py`): any replica serves any step.

Every route does its work (store, task parsing, tool calls, the trace) in a worker thread:
the event loop only awaits.
"""

from __future__ import annotations

import json

import anyio
from fastapi import APIRouter

from service.deps import EnvSessionsDep, PipelineDep, RewardCaller
from service.env_schemas import VERIFIER, FinishRequest, OpenedEnv, OpenEnv, StepRequest, StepResult
from service.env_sessions import EnvSessionStore
from service.errors import (
    EnvSessionConflict,
    EnvSessionLimit,
    EnvSessionNotFound,
    EnvSessionsFull,
    EnvSessionTooLarge,
    RequestInvalid,
    Saturated,
    TaskNotFound,
    responses,
)
from service.pipeline import Pipeline
from service.pipeline.resolve import resolve
from service.schemas import VerifyRequest, VerifyResult
from verifiers.tool_state.inside.packs import get_pack
from verifiers.tool_state.task import ToolStateTask
from verifiers.tool_state.wire import MAX_ARGS_CHARS, dumps_trace

router = APIRouter(prefix="/v1/envs", tags=["environments"])
_errors = responses(EnvSessionNotFound, EnvSessionConflict, EnvSessionTooLarge, EnvSessionLimit, EnvSessionsFull,
                    TaskNotFound)


def _task(pipeline: Pipeline, opened: OpenEnv) -> ToolStateTask:
    """The session's task (a registered task is read from the store). Blocking."""
    task = resolve(pipeline, opened).task  # TaskInvalid -> 422, unknown task_id -> 404
    assert isinstance(task, ToolStateTask)
    return task


@router.post("", response_model=OpenedEnv, status_code=201, responses=_errors)
async def open_env(body: OpenEnv, pipeline: PipelineDep, sessions: EnvSessionsDep, caller: RewardCaller) -> OpenedEnv:
    """Open a session on a `tool_state` task: the environment starts in the task's initial state."""

    def run() -> OpenedEnv:
        task = _task(pipeline, body)
        row = sessions.open(caller.key_id, body.model_dump(mode="json"), task)
        return OpenedEnv(env_id=row.id, environment=task.environment, actor=task.actor,
                         tools=get_pack(task.environment).schemas(task.allowed_tools), max_steps=task.max_calls,
                         expires_in_s=sessions.ttl_s)

    return await anyio.to_thread.run_sync(run)


@router.post("/{env_id}/step", response_model=StepResult, responses=_errors)
async def step(env_id: str, body: StepRequest, pipeline: PipelineDep, sessions: EnvSessionsDep,
               caller: RewardCaller) -> StepResult:
    """Run one tool call as the session's actor and return the tool's reply."""

    def run() -> StepResult:
        if len(json.dumps(body.args)) > MAX_ARGS_CHARS:
            raise RequestInvalid(f"args: longer than {MAX_ARGS_CHARS} characters")
        row = sessions.get(env_id, caller.key_id)
        done = sessions.step(env_id, caller.key_id, _task(pipeline, OpenEnv(**row.opened)), body.tool, body.args)
        reply = done.event.reply()
        return StepResult(ok=reply["ok"], result=reply.get("result"), error=reply.get("error"),
                          step=done.event.index, steps_left=done.steps_left)

    return await anyio.to_thread.run_sync(run)


def _finish_request(sessions: EnvSessionStore, env_id: str, key_id: str,
                    body: FinishRequest) -> VerifyResult | VerifyRequest:
    """The logged result of a retried finish, or the verification to run. Blocking."""
    row = sessions.claim_finish(env_id, key_id)
    if row.result is not None:
        return VerifyResult.model_validate(row.result)  # a retried finish: same answer, no second record
    opened = OpenEnv(**row.opened)
    return VerifyRequest(verifier=VERIFIER, task=opened.task, task_id=opened.task_id,
                         response=dumps_trace(row.calls, body.final_message), request_id=body.request_id,
                         evidence="feedback",  # what an agent loop shows the policy
                         run=body.run or opened.run)


@router.post("/{env_id}/finish", response_model=VerifyResult, responses=responses(
    EnvSessionNotFound, EnvSessionConflict, RequestInvalid, Saturated, TaskNotFound))
async def finish(env_id: str, body: FinishRequest, pipeline: PipelineDep, sessions: EnvSessionsDep,
                 caller: RewardCaller) -> VerifyResult:
    """Verify the server-held trace with the final message: the same result and record as /v1/verify."""
    claimed = await anyio.to_thread.run_sync(_finish_request, sessions, env_id, caller.key_id, body)
    if isinstance(claimed, VerifyResult):
        return claimed
    try:
        result = await pipeline.verify(claimed, caller)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(sessions.release, env_id)  # let the trainer retry (e.g. after a 503)
        raise
    await anyio.to_thread.run_sync(sessions.finished, env_id, result.model_dump(mode="json"))
    return result


@router.delete("/{env_id}", status_code=204, responses=_errors)
async def close_env(env_id: str, sessions: EnvSessionsDep, caller: RewardCaller) -> None:
    """Drop a session without verifying it (frees its slot)."""
    await anyio.to_thread.run_sync(sessions.remove, env_id, caller.key_id)
