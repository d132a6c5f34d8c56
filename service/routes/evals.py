"""Held-out evaluation runs: verify task families, report and compare checkpoints."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends, Request

from service.auth import Caller, require_scope
from service.evals import compare, eval_report, run_eval
from service.inspection_schemas import EvalComparison, EvalIn, EvalOut
from service.schemas import ErrorOut

router = APIRouter(prefix="/v1/evals", tags=["evaluation"])
_errors = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut},
           413: {"model": ErrorOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}}


@router.post("", response_model=EvalOut, status_code=201, responses=_errors)
async def create_eval(body: EvalIn, request: Request, caller: Caller = Depends(require_scope("reward"))) -> EvalOut:
    """Verify each family's tasks like groups (records tagged with the run's id) and report."""
    return await run_eval(request.app.state.engine, body, caller)


@router.get("/{eval_id}", response_model=EvalOut, responses=_errors)
async def get_eval(eval_id: str, request: Request, _: Caller = Depends(require_scope("audit"))) -> EvalOut:
    """The run's report per family and overall."""
    return await anyio.to_thread.run_sync(eval_report, request.app.state.store, eval_id)


@router.get("/{eval_id}/compare/{other_id}", response_model=EvalComparison, responses=_errors)
async def compare_evals(eval_id: str, other_id: str, request: Request,
                        _: Caller = Depends(require_scope("audit"))) -> EvalComparison:
    """Per family: other minus this, with bootstrap 95% intervals over tasks."""
    return await anyio.to_thread.run_sync(compare, request.app.state.store, eval_id, other_id)
