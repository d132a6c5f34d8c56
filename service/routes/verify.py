"""Reward endpoints: one response, or whole groups with advantages."""

from __future__ import annotations

from fastapi import APIRouter

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
from service.schemas import GroupsRequest, GroupsResponse, VerifyRequest, VerifyResult

router = APIRouter(prefix="/v1", tags=["rewards"])
_raises = (EvidenceForbidden, TaskNotFound, RequestInvalid, Saturated)


@router.post("/verify", response_model=VerifyResult, responses=responses(*_raises, RequestIdConflict))
async def verify(body: VerifyRequest, pipeline: PipelineDep, caller: RewardCaller) -> VerifyResult:
    """Verify one response and log its record before answering."""
    return await pipeline.verify(body, caller)


@router.post("/groups", response_model=GroupsResponse, responses=responses(*_raises, IdempotencyConflict))
async def groups(body: GroupsRequest, pipeline: PipelineDep, caller: RewardCaller,
                 idempotency_key: IdempotencyKey = None) -> GroupsResponse:
    """Verify groups of responses; return rewards, group-relative advantages and record ids."""
    return await pipeline.groups(body, caller, idempotency_key)
