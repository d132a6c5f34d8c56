"""Task certification and the verifier release gate."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from service.certification import Certifier
from service.certification_schemas import CertifyRequest, CertifyResponse, DiffRequest, VerifierDiffOut
from service.deps import AuditCaller, PipelineDep, RewardCaller, StoreDep
from service.errors import DiffNotFound, RequestInvalid, Saturated, TaskNotFound, responses
from service.verifier_diff import VerifierDiff
from verifiers import registry

router = APIRouter(prefix="/v1", tags=["certification"])


@router.post("/tasks/certify", response_model=CertifyResponse,
             responses=responses(TaskNotFound, RequestInvalid, Saturated))
async def certify_tasks(body: CertifyRequest, pipeline: PipelineDep, caller: RewardCaller) -> CertifyResponse:
    """Run each task's reference (twice or more) and its family's probes; append a certificate per task."""
    return await Certifier(pipeline).certify(body, caller)


@router.post("/verifiers/{name}/diff", response_model=VerifierDiffOut, status_code=201,
             responses=responses(RequestInvalid, Saturated))
async def run_diff(name: str, body: DiffRequest, pipeline: PipelineDep, caller: AuditCaller) -> VerifierDiffOut:
    """Replay a verdict-stratified sample of logged records with the verifier as it is now."""
    return await VerifierDiff(pipeline).run(name, body, caller)


@router.get("/verifiers/{name}/diff", response_model=VerifierDiffOut, responses=responses(DiffNotFound))
async def last_diff(name: str, store: StoreDep, _: AuditCaller) -> VerifierDiffOut:
    """The newest release-gate report of a verifier."""
    verifier = registry.get(name)
    row = await anyio.to_thread.run_sync(store.latest_verifier_diff, verifier.name)
    if row is None:
        raise DiffNotFound(f"no diff report for verifier {verifier.name!r} yet")
    return VerifierDiffOut.model_validate(row.report)
