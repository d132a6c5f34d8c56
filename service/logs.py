"""Structured JSON logs (python-json-logger) for the app and uvicorn, with secrets redacted.

One line per HTTP request (`RequestLog`) and one per verification (`log_verification`),
each carrying the request id and the caller's key id, never the key. Every line passes
`RedactSecrets`, so a key in a query string (`/v1/openrlhf?api_key=...`), a bearer header
or a message never reaches the log.
"""

from __future__ import annotations

import logging
import logging.config
import re
import time
import uuid
from contextvars import ContextVar
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

request_id_var: ContextVar[str | None] = ContextVar("assay_request_id", default=None)

_SECRETS = (
    # API keys: ak_<key id>_<secret>; the key id may be logged, the secret never.
    (re.compile(r"\b(ak_[0-9a-f]{1,64}_)[A-Za-z0-9_\-]+"), r"\1[redacted]"),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',]+"), r"\1[redacted]"),
    (re.compile(r"(?i)([?&;](?:api[_-]?key|key|token|access_token|secret|password|auth)=)[^&\s\"']*"),
     r"\1[redacted]"),
)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")

access = logging.getLogger("assay.access")
verification = logging.getLogger("assay.verification")


def redact(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites the message (and string extras) of every record without secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        for name, value in list(vars(record).items()):
            if isinstance(value, str) and name not in ("msg", "name", "levelname", "pathname", "filename"):
                setattr(record, name, redact(value))
        return True


class RequestContext(logging.Filter):
    """Adds the current HTTP request id to every record made while serving it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id_var.get()
        record.__dict__.pop("color_message", None)  # uvicorn's ANSI-coloured copy of the message
        return True


def logging_config(level: str = "info") -> dict[str, Any]:
    """A dictConfig for the root logger, `assay.*` and uvicorn's loggers: JSON lines on stderr."""
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact": {"()": RedactSecrets}, "context": {"()": RequestContext}},
        "formatters": {"json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            "datefmt": "%Y-%m-%dT%H:%M:%S%z",
        }},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "json", "filters": ["context", "redact"]}},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {name: {"handlers": [], "level": level, "propagate": True}
                    for name in ("assay", "service", "uvicorn", "uvicorn.error", "uvicorn.access")},
    }


def configure_logging(level: str = "info") -> dict[str, Any]:
    config = logging_config(level)
    logging.config.dictConfig(config)
    return config


def log_verification(row: Any) -> None:
    """One line per verification: ids, verifier, verdict, reward, duration (never the response)."""
    if not verification.isEnabledFor(logging.INFO):  # its fields are not gathered for nothing
        return
    verification.info("verification", extra={
        "key_id": row.caller_key_id, "record_id": row.id, "verifier": row.verifier, "verdict": row.verdict,
        "reward": row.reward, "duration_ms": row.duration_ms, "group_id": row.group_id,
        "client_request_id": row.request_id, "flags": row.flags,
        "run_id": getattr(row, "run_id", None), "run_step": getattr(row, "run_step", None),
    })


class RequestLog:
    """ASGI middleware: a request id per request (X-Request-ID in and out) and one access line.

    `on_response(scope, route, status)` is called for every answered request (metrics use it).
    """

    def __init__(self, app: ASGIApp, on_response: Any = None) -> None:
        self.app, self.on_response = app, on_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        state = scope.setdefault("state", {})
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            if access.isEnabledFor(logging.INFO):
                access.info("request", extra={
                    "method": scope.get("method"), "path": scope.get("path"), "route": route, "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3), "key_id": state.get("key_id"),
                    "client": (scope.get("client") or ("", 0))[0],
                })
            if self.on_response is not None:
                self.on_response(scope, route, status)
            request_id_var.reset(token)
