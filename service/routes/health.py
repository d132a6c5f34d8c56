"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from service.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """The audit store answers and the executor (its sandbox, or the Ray cluster) started."""
    try:
        request.app.state.store.ping()
    except Exception as exc:
        return JSONResponse({"status": "unavailable", "detail": f"audit store: {exc}"[:300]}, status_code=503)
    return JSONResponse({"status": "ready", "sandbox": request.app.state.engine.executor.describe()})


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    """Prometheus exposition (prometheus_client)."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)
