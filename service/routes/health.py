"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import logging

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from service.deps import ExecutorDep, MetricsDep, StoreDep
from service.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])
log = logging.getLogger(__name__)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(store: StoreDep, executor: ExecutorDep) -> Response:
    """The audit store answers and the executor (its sandbox, or the Ray cluster) started."""
    try:
        await anyio.to_thread.run_sync(store.ping)
    except Exception:
        # Unauthenticated callers get no exception text (it can name hosts, users, paths).
        log.exception("readiness check: the audit store does not answer")
        return JSONResponse({"status": "unavailable", "detail": "the audit store does not answer"},
                            status_code=503)
    return JSONResponse({"status": "ready", "sandbox": executor.describe()})


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request, registry: MetricsDep) -> Response:
    """Prometheus exposition (prometheus_client); absent here when ASSAY_METRICS_PORT serves it."""
    if getattr(request.app.state, "metrics_on_own_port", False):
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    return Response(registry.render(), media_type=CONTENT_TYPE)
