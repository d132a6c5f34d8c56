"""Reward endpoints: one response, or whole groups with advantages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from starlette.responses import Response

from service.auth import Caller, require_scope
from service.fast_json import model_response
from service.schemas import ErrorOut, GroupsRequest, GroupsResponse, VerifyRequest, VerifyResult

router = APIRouter(prefix="/v1", tags=["rewards"])
_errors = {401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 404: {"model": ErrorOut},
           413: {"model": ErrorOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}}
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", max_length=200,
    description="Repeat a request safely: same key, same answer, no new records.")]


@router.post("/verify", response_model=VerifyResult, responses=_errors)
async def verify(body: VerifyRequest, request: Request,
                 caller: Caller = Depends(require_scope("reward"))) -> Response:
    """Verify one response and log its record before answering."""
    return model_response(await request.app.state.engine.verify(body, caller))  # perf hook: JSON fast path


@router.post("/groups", response_model=GroupsResponse, responses=_errors)
async def groups(body: GroupsRequest, request: Request, idempotency_key: IdempotencyKey = None,
                 caller: Caller = Depends(require_scope("reward"))) -> Response:
    """Verify groups of responses; return rewards, group-relative advantages and record ids."""
    return model_response(await request.app.state.engine.groups(body, caller, idempotency_key))  # perf hook
