"""Verifiers and registered tasks. Hidden task fields are never returned, only hashes."""

from __future__ import annotations

from datetime import datetime

import anyio
from fastapi import APIRouter, Query

from service.certification import Certifier, diff_summary, latest_certificate
from service.certification_schemas import CertifyItem, CertifyRequest
from service.deps import AdminCaller, AuditCaller, PipelineDep, RewardCaller, StoreDep
from service.errors import TaskConflict, TaskNotFound, responses
from service.inspection_schemas import TaskStatsOut
from service.pipeline import resolve
from service.schemas import RegisteredTask, TaskRegistration, VerifierInfo
from service.task_stats import task_stats
from verifiers import registry

router = APIRouter(prefix="/v1", tags=["tasks"])
# Routes that read or write the store are plain functions: FastAPI runs them on its
# thread pool, off the event loop.


@router.get("/verifiers", response_model=list[VerifierInfo])
def verifiers(store: StoreDep, _: RewardCaller) -> list[VerifierInfo]:
    """The verifiers this service runs, with their task schemas and their newest release-gate report."""
    return [VerifierInfo(**registry.get(name).describe(), last_diff=diff_summary(store.latest_verifier_diff(name)))
            for name in registry.names()]


@router.post("/tasks", response_model=RegisteredTask, status_code=201, responses=responses(TaskConflict))
async def register_task(body: TaskRegistration, pipeline: PipelineDep, caller: AdminCaller) -> RegisteredTask:
    """Register a task under an id (idempotent for identical content; 409 for different content);
    with `certify: true`, certify it too (the answer carries the certificate)."""
    found = await anyio.to_thread.run_sync(resolve.register_task, pipeline, body)
    if body.certify:
        item = CertifyItem(verifier=body.verifier, task_id=body.task_id, reference=body.reference)
        done = await Certifier(pipeline).certify(CertifyRequest(tasks=[item]), caller)
        found.certificate = done.certificates[0].model_dump(mode="json")
    return found


# Declared before /tasks/{task_id:path}, which would otherwise take "stats" as an id.
@router.get("/tasks/stats", response_model=TaskStatsOut)
async def stats(store: StoreDep, _: AuditCaller, task_id: str | None = None, task_hash: str | None = None,
                verifier: str | None = None, since: datetime | None = None, until: datetime | None = None,
                limit: int = Query(1000, ge=1, le=10_000)) -> TaskStatsOut:
    """Curriculum signals per task over a time window: attempts, raw pass rate,
    zero-variance share of its groups, mean tokens, difficulty band."""
    found = await anyio.to_thread.run_sync(lambda: task_stats(
        store, task_id=task_id, task_hash=task_hash, verifier=verifier, since=since, until=until, limit=limit))
    certificates = await anyio.to_thread.run_sync(store.latest_certificates, sorted({t.task_hash for t in found}))
    for stat in found:
        stat.certificate = certificates[stat.task_hash].status if stat.task_hash in certificates else None
    return TaskStatsOut(tasks=found)


@router.get("/tasks/{task_id:path}", response_model=RegisteredTask, responses=responses(TaskNotFound))
def get_task(task_id: str, pipeline: PipelineDep, store: StoreDep, _: RewardCaller) -> RegisteredTask:
    """A registered task's public view, with its newest certificate."""
    found = resolve.registered(pipeline, task_id)
    found.certificate = latest_certificate(store, found.task_hash)
    return found
