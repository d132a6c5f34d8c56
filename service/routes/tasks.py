"""Verifiers and registered tasks. Hidden task fields are never returned, only hashes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from service.auth import Caller, require_scope
from service.schemas import ErrorOut, RegisteredTask, TaskRegistration, VerifierInfo
from verifiers import registry

router = APIRouter(prefix="/v1", tags=["tasks"])
# Routes that read or write the store are plain functions: FastAPI runs them on its
# thread pool, off the event loop.


@router.get("/verifiers", response_model=list[VerifierInfo])
async def verifiers(_: Caller = Depends(require_scope("reward"))) -> list[VerifierInfo]:
    """The verifiers this service runs, with their task schemas."""
    return [VerifierInfo(**registry.get(name).describe()) for name in registry.names()]


@router.post("/tasks", response_model=RegisteredTask, status_code=201,
             responses={409: {"model": ErrorOut}, 422: {"model": ErrorOut}})
def register_task(body: TaskRegistration, request: Request,
                        _: Caller = Depends(require_scope("admin"))) -> RegisteredTask:
    """Register a task under an id (idempotent for identical content; 409 for different content)."""
    return request.app.state.engine.register_task(body)


@router.get("/tasks/{task_id:path}", response_model=RegisteredTask, responses={404: {"model": ErrorOut}})
def get_task(task_id: str, request: Request, _: Caller = Depends(require_scope("reward"))) -> RegisteredTask:
    """A registered task's public view."""
    return request.app.state.engine.registered(task_id)
