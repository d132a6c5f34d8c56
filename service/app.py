"""The FastAPI application: wiring, error mapping, limits."""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

import service.routes
from sandboxes.base import SandboxBusy, SandboxUnavailable
from service.alarms import AlarmMonitor, AlarmSink
from service.config import Settings
from service.edge import EdgeGuard, EdgeLimits
from service.engine import Engine, RequestIdConflict, RequestInvalid, Saturated, TaskNotFound
from service.env_sessions import EnvSessionStore
from service.executors import LocalExecutor, create_executor
from service.logs import RequestLog
from service.metrics import Metrics, serve_metrics_port
from service.openapi import add_links
from service.packing import TooBigToFit
from service.record_writer import AuditWriteFailed
from service.review import LabelLimit
from service.schemas import TaskRegistration
from service.signing import Signer, key_path
from service.store import AuditStore, IdempotencyConflict, TaskConflict
from service.ui import install as install_viewer
from service.validation import RequestLimits, printable
from service.views import EvidenceForbidden
from verifiers import registry
from verifiers.base import TaskInvalid, UnknownVerifier, VerifyContext

log = logging.getLogger("assay")


def load_task_pack(engine: Engine, path: Path) -> int:
    """Register every task of a JSONL task pack ({"task_id", "verifier", "task"} per line)."""
    count = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            engine.register_task(TaskRegistration.model_validate_json(line))
        except Exception as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
        count += 1
    return count


def _include_routers(app: FastAPI) -> None:
    # perf hook: the reward routes first, so the hot path is matched before every other route.
    for info in sorted(pkgutil.iter_modules(service.routes.__path__), key=lambda info: info.name != "verify"):
        module = importlib.import_module(f"service.routes.{info.name}")
        if hasattr(module, "router"):
            app.include_router(module.router)


class SafeJSONResponse(JSONResponse):
    """JSON that can always be sent: a lone surrogate stored before the service refused them
    goes out as its `\\udXXX` escape (as `ensure_ascii` would write it), never as a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode("utf-8", "backslashreplace")


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error answer; whatever the message echoes, it can be encoded."""
    return SafeJSONResponse({"detail": printable(detail)}, status_code=status, headers=headers)


def edge_limits(settings: Settings) -> EdgeLimits:
    return EdgeLimits(settings.max_body_bytes, settings.max_json_depth, RequestLimits(
        max_groups=settings.max_groups, max_group_size=settings.max_group_size,
        max_eval_tasks=settings.max_eval_tasks, max_openrlhf_samples=settings.max_openrlhf_samples))


def _count_request(scope: Scope, route: str, status: int) -> None:
    metrics = getattr(scope["app"].state, "metrics", None)
    if metrics is not None:
        metrics.inc("assay_http_requests_total", route=route, status=str(status))


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        signer = Signer.load_or_create(key_path(settings))
        store = AuditStore(settings.database_url, signer, **settings.chain_options())
        app.state.signer = signer
        executor = create_executor(settings)
        # Under `ray` this replica runs no untrusted work: it has no sandbox of its own.
        sandbox = executor.sandbox if isinstance(executor, LocalExecutor) else None
        metrics = Metrics()
        if sandbox is not None:
            metrics.watch_sandbox(sandbox.pool_stats)
        stop_metrics = None
        if settings.metrics_port is not None:
            stop_metrics = serve_metrics_port(metrics, settings.metrics_host, settings.metrics_port)
        app.state.metrics_on_own_port = stop_metrics is not None
        engine = Engine(settings, store, sandbox, metrics, executor)
        app.state.store, app.state.sandbox, app.state.metrics, app.state.engine = store, sandbox, metrics, engine
        app.state.env_sessions = EnvSessionStore(store, settings)
        app.state.alarm_sink = AlarmSink(settings, metrics)
        monitor = AlarmMonitor(store, app.state.alarm_sink, settings.alarm_check_interval_s)
        engine.on_logged = monitor.observe
        if settings.task_pack is not None:
            log.info("loaded %d tasks from %s", load_task_pack(engine, settings.task_pack), settings.task_pack)
        if sandbox is not None:
            for name in registry.names():
                registry.get(name).warm(VerifyContext(sandbox, services=settings.verifier_services))
        try:
            yield
        finally:
            if sandbox is not None:
                for name in registry.names():
                    registry.get(name).close(VerifyContext(sandbox, services=settings.verifier_services))
            monitor.close()
            executor.close()
            store.close()
            if stop_metrics is not None:
                stop_metrics()

    app = FastAPI(
        title="Assay",
        version="0.1.0",
        summary="Verifier-first, sandboxed reward service for RLVR and GRPO.",
        lifespan=lifespan,
        # ASSAY_API_DOCS=false: no /docs, /redoc or /openapi.json (compose's default).
        **({} if settings.api_docs else {"docs_url": None, "redoc_url": None, "openapi_url": None}),
        default_response_class=SafeJSONResponse,
    )
    _include_routers(app)
    generate_openapi = app.openapi
    app.openapi = lambda: add_links(generate_openapi())  # type: ignore[method-assign]
    install_viewer(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": printable(".".join(str(p) for p in e["loc"])), "message": printable(e["msg"])}
                  for e in exc.errors()]
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return SafeJSONResponse({"detail": summary, "errors": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.detail, str):
            exc.detail = printable(exc.detail)
        return await http_exception_handler(request, exc)

    handlers: list[tuple[type[Exception], int]] = [
        (TaskInvalid, 422), (RequestInvalid, 422), (UnknownVerifier, 422), (TaskNotFound, 404),
        (TaskConflict, 409), (RequestIdConflict, 409), (IdempotencyConflict, 422), (LabelLimit, 409),
        (TooBigToFit, 422), (EvidenceForbidden, 403),
    ]
    for exc_type, status in handlers:
        app.add_exception_handler(exc_type, lambda _r, exc, status=status: _error(status, str(exc)))

    for exc_type, reason in ((Saturated, "saturated"), (SandboxBusy, "sandbox_busy"),
                             (SandboxUnavailable, "sandbox_unavailable"),
                             (AuditWriteFailed, "audit_write_failed")):  # perf hook: records not written: 503
        app.add_exception_handler(exc_type, lambda r, exc, reason=reason: _retry_later(r, exc, reason))

    def _retry_later(request: Request, exc: Exception, reason: str) -> JSONResponse:
        request.app.state.metrics.unavailable.labels(reason).inc()
        return _error(503, str(exc), {"Retry-After": str(settings.retry_after_s)})

    app.add_middleware(EdgeGuard, limits=edge_limits(settings))  # key, size and depth before any body is parsed
    app.add_middleware(RequestLog, on_response=_count_request)  # outermost: logs 401s and 413s too
    return app
