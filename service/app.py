"""The FastAPI application: wiring, error mapping, limits."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from service.alarms import AlarmMonitor, AlarmSink
from service.config import Settings
from service.db_warm_up import warm_connections
from service.edge import EdgeGuard, EdgeLimits
from service.env_sessions import EnvSessionStore
from service.errors import install_error_handlers, problems, summary
from service.executors import LocalExecutor, create_executor
from service.json_response import SafeJSONResponse
from service.logs import RequestLog
from service.metrics import Metrics, serve_metrics_port
from service.openapi import add_links
from service.pipeline import Pipeline
from service.pipeline.resolve import register_task
from service.reward_lane import RewardLane
from service.routes import include_routers
from service.schemas import TaskRegistration
from service.signing import Signer, key_path
from service.store import AuditStore
from service.ui import install as install_viewer
from service.ui.render import compile_templates
from service.validation import RequestLimits, printable
from service.warm_up import families, warm_verifiers
from verifiers import registry
from verifiers.base import VerifyContext

log = logging.getLogger("assay")


def load_task_pack(pipeline: Pipeline, path: Path) -> int:
    """Register every task of a JSONL task pack ({"task_id", "verifier", "task"} per line)."""
    count = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            register_task(pipeline, TaskRegistration.model_validate_json(line))
        except Exception as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
        count += 1
    return count


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
    families(settings.warm_up)  # a family that does not exist stops the start, naming ASSAY_WARM_UP

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
        pipeline = Pipeline(settings, store, executor, metrics)
        app.state.store, app.state.metrics, app.state.pipeline = store, metrics, pipeline
        app.state.env_sessions = EnvSessionStore(store, settings)
        app.state.alarm_sink = AlarmSink(settings, metrics)
        monitor = AlarmMonitor(store, app.state.alarm_sink, settings.alarm_check_interval_s)
        pipeline.on_logged = monitor.observe
        if settings.task_pack is not None:
            log.info("loaded %d tasks from %s", load_task_pack(pipeline, settings.task_pack), settings.task_pack)
        if sandbox is not None:
            warm_verifiers(sandbox, settings.warm_up, settings.verifier_services)
        # Before the service answers: what the first reads of a fresh process paid (service/db_warm_up.py).
        compile_templates()
        warm_connections(store)
        try:
            yield
        finally:
            if sandbox is not None:
                for name in registry.names():
                    registry.get(name).close(VerifyContext(sandbox, services=settings.verifier_services))
            monitor.close()
            metrics.close()
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
    include_routers(app)
    generate_openapi = app.openapi
    app.openapi = lambda: add_links(generate_openapi())  # type: ignore[method-assign]
    install_viewer(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        found = [{k: printable(v) for k, v in p.items()} for p in problems(exc.errors())]
        return SafeJSONResponse({"detail": summary(found), "errors": found}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.detail, str):
            exc.detail = printable(exc.detail)
        return await http_exception_handler(request, exc)

    def _unavailable(request: Request, reason: str) -> None:
        request.app.state.metrics.unavailable.labels(reason).inc()

    install_error_handlers(app, settings.retry_after_s, _unavailable)
    app.add_middleware(RewardLane)  # the reward routes' own lane, behind the guard (service/reward_lane.py)
    app.add_middleware(EdgeGuard, limits=edge_limits(settings))  # key, size and depth before any body is parsed
    app.add_middleware(RequestLog, on_response=_count_request)  # outermost: logs 401s and 413s too
    return app
