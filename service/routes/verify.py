"""Reward endpoints: one response, or whole groups with advantages."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from service.deps import IdempotencyKey, PipelineDep, RewardCaller
from service.errors import (
    EvidenceForbidden,
    IdempotencyConflict,
    RequestIdConflict,
    RequestInvalid,
    Saturated,
    TaskNotFound,
    responses,
)
from service.fast_json import model_response
from service.schemas import GroupsRequest, GroupsResponse, VerifyRequest, VerifyResult

router = APIRouter(prefix="/v1", tags=["rewards"])
_raises = (EvidenceForbidden, TaskNotFound, RequestInvalid, Saturated)


@router.post("/verify", response_model=VerifyResult, responses=responses(*_raises, RequestIdConflict))
async def verify(body: VerifyRequest, pipeline: PipelineDep, caller: RewardCaller) -> Response:
    """Verify one response and log its record before answering."""
    return model_response(await pipeline.verify(body, caller))  # one model_dump_json (service/fast_json.py)


@router.post("/groups", response_model=GroupsResponse, responses=responses(*_raises, IdempotencyConflict))
async def groups(body: GroupsRequest, pipeline: PipelineDep, caller: RewardCaller,
                 idempotency_key: IdempotencyKey = None) -> Response:
    """Verify groups of responses; return rewards, group-relative advantages and record ids."""
    return model_response(await pipeline.groups(body, caller, idempotency_key))
