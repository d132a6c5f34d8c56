"""Held-out evaluation runs: verify task families, report and compare checkpoints."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from service.deps import AuditCaller, PipelineDep, RewardCaller, StoreDep
from service.errors import EvalNotFound, RequestInvalid, Saturated, TaskNotFound, responses
from service.evals import compare, eval_report, run_eval
from service.inspection_schemas import EvalComparison, EvalIn, EvalOut

router = APIRouter(prefix="/v1/evals", tags=["evaluation"])


@router.post("", response_model=EvalOut, status_code=201, responses=responses(TaskNotFound, RequestInvalid, Saturated))
async def create_eval(body: EvalIn, pipeline: PipelineDep, caller: RewardCaller) -> EvalOut:
    """Verify each family's tasks like groups (records tagged with the run's id) and report."""
    return await run_eval(pipeline, body, caller)


@router.get("/{eval_id}", response_model=EvalOut, responses=responses(EvalNotFound))
async def get_eval(eval_id: str, store: StoreDep, _: AuditCaller) -> EvalOut:
    """The run's report per family and overall."""
    return await anyio.to_thread.run_sync(eval_report, store, eval_id)


@router.get("/{eval_id}/compare/{other_id}", response_model=EvalComparison, responses=responses(EvalNotFound))
async def compare_evals(eval_id: str, other_id: str, store: StoreDep, _: AuditCaller) -> EvalComparison:
    """Per family: other minus this, with bootstrap 95% intervals over tasks."""
    return await anyio.to_thread.run_sync(compare, store, eval_id, other_id)
