"""The FastAPI application: wiring, error mapping, limits."""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import service.routes
from sandboxes.base import SandboxBusy, SandboxUnavailable
from service.config import Settings
from service.engine import Engine, RequestIdConflict, RequestInvalid, Saturated, TaskNotFound
from service.env_sessions import EnvSessionStore
from service.executors import LocalExecutor, create_executor
from service.logs import RequestLog
from service.metrics import Metrics
from service.openapi import add_links
from service.schemas import TaskRegistration
from service.signing import Signer, key_path
from service.store import AuditStore, IdempotencyConflict, TaskConflict
from service.ui import install as install_viewer
from verifiers import registry
from verifiers.base import TaskInvalid, UnknownVerifier, VerifyContext

log = logging.getLogger("assay")


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """Reject bodies over the limit before they are buffered (Content-Length or streamed)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._reject(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except BodyTooLarge:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body exceeds {self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


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
    for info in pkgutil.iter_modules(service.routes.__path__):
        module = importlib.import_module(f"service.routes.{info.name}")
        if hasattr(module, "router"):
            app.include_router(module.router)


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


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
        engine = Engine(settings, store, sandbox, metrics, executor)
        app.state.store, app.state.sandbox, app.state.metrics, app.state.engine = store, sandbox, metrics, engine
        app.state.env_sessions = EnvSessionStore(store, settings)
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
            executor.close()
            store.close()

    app = FastAPI(
        title="Assay",
        version="0.1.0",
        summary="Verifier-first, sandboxed reward service for RLVR and GRPO.",
        lifespan=lifespan,
    )
    _include_routers(app)
    generate_openapi = app.openapi
    app.openapi = lambda: add_links(generate_openapi())  # type: ignore[method-assign]
    install_viewer(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return JSONResponse({"detail": summary, "errors": errors}, status_code=422)

    handlers: list[tuple[type[Exception], int]] = [
        (TaskInvalid, 422), (RequestInvalid, 422), (UnknownVerifier, 422), (TaskNotFound, 404),
        (TaskConflict, 409), (RequestIdConflict, 409), (IdempotencyConflict, 422),
    ]
    for exc_type, status in handlers:
        app.add_exception_handler(exc_type, lambda _r, exc, status=status: _error(status, str(exc)))

    for exc_type, reason in ((Saturated, "saturated"), (SandboxBusy, "sandbox_busy"),
                             (SandboxUnavailable, "sandbox_unavailable")):
        app.add_exception_handler(exc_type, lambda r, exc, reason=reason: _retry_later(r, exc, reason))

    def _retry_later(request: Request, exc: Exception, reason: str) -> JSONResponse:
        request.app.state.metrics.unavailable.labels(reason).inc()
        return _error(503, str(exc), {"Retry-After": str(settings.retry_after_s)})

    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(RequestLog, on_response=_count_request)  # outermost: logs 413s too
    return app
