"""Task certification and the verifier release gate."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends, Request

from service.auth import Caller, require_scope
from service.certification import Certifier
from service.certification_schemas import CertifyRequest, CertifyResponse, DiffRequest, VerifierDiffOut
from service.engine import TaskNotFound
from service.schemas import ErrorOut
from service.verifier_diff import VerifierDiff
from verifiers import registry

router = APIRouter(prefix="/v1", tags=["certification"])


@router.post("/tasks/certify", response_model=CertifyResponse,
             responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def certify_tasks(body: CertifyRequest, request: Request,
                        caller: Caller = Depends(require_scope("reward"))) -> CertifyResponse:
    """Judge each task's reference (twice or more) and its family's probes; append a certificate per task."""
    return await Certifier(request.app.state.engine).certify(body, caller)


@router.post("/verifiers/{name}/diff", response_model=VerifierDiffOut, status_code=201,
             responses={422: {"model": ErrorOut}, 503: {"model": ErrorOut}})
async def run_diff(name: str, body: DiffRequest, request: Request,
                   caller: Caller = Depends(require_scope("audit"))) -> VerifierDiffOut:
    """Replay a verdict-stratified sample of logged records with the verifier as it is now."""
    return await VerifierDiff(request.app.state.engine).run(name, body, caller)


@router.get("/verifiers/{name}/diff", response_model=VerifierDiffOut, responses={404: {"model": ErrorOut}})
async def last_diff(name: str, request: Request, _: Caller = Depends(require_scope("audit"))) -> VerifierDiffOut:
    """The newest release-gate report of a verifier."""
    verifier = registry.get(name)
    row = await anyio.to_thread.run_sync(request.app.state.store.latest_verifier_diff, verifier.name)
    if row is None:
        raise TaskNotFound(f"no diff report for verifier {verifier.name!r} yet")
    return VerifierDiffOut.model_validate(row.report)
