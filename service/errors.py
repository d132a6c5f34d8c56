"""Every exception the service raises on purpose, and the one table of their HTTP statuses.

The tree (bases name the caller's recourse, leaves name the event)::

    ServiceError
    ├── Rejected                     fix the request; retrying it as it is will not help (4xx)
    │   ├── Unauthenticated              401  no key, or a key that is unknown or revoked
    │   ├── Forbidden                    403  the key lacks a scope
    │   │   └── EvidenceForbidden        403  full evidence of a registered task without `audit`
    │   ├── NotFound                     404
    │   │   ├── TaskNotFound                  a task id that is not registered
    │   │   ├── RecordNotFound                a record id, or a replayed record's task content
    │   │   ├── EvalNotFound                  an evaluation run
    │   │   ├── RunNotFound                   a training run no record carries
    │   │   ├── DiffNotFound                  a verifier with no release-gate report yet
    │   │   ├── KeyNotFound                   an API key id
    │   │   └── EnvSessionNotFound            an environment session
    │   ├── Conflict                     409
    │   │   ├── TaskConflict                  a task id registered with other content
    │   │   ├── RequestIdConflict             a `request_id` reused for another request
    │   │   ├── LabelLimit                    a record holding the most labels it may
    │   │   └── EnvSessionConflict            a session finished, full, or changed concurrently
    │   ├── RequestInvalid               422  a service limit; the message names the field
    │   │   ├── TooBigToFit                   one group alone is over the in-flight budget
    │   │   ├── IdempotencyConflict           an Idempotency-Key reused for another body
    │   │   └── EnvSessionTooLarge            a session's state over its bound
    │   └── EnvSessionLimit              429  this key holds the most open sessions (no Retry-After)
    └── RetryLater                   try again after `Retry-After` seconds; nothing was logged
        ├── Saturated                    503  the in-flight budget is spent
        ├── Unverified                   503  `error_policy=raise` and some response got verdict `error`
        ├── AuditWriteFailed             503  the request's records could not be written (nothing answered)
        └── EnvSessionsFull              429  the service holds the most open sessions

Defined elsewhere, with rows here: `TaskInvalid`, `UnknownVerifier` (verifiers/base.py, 422)
and `SandboxBusy`, `SandboxUnavailable` (sandboxes/base.py, 503 + Retry-After).

`STATUS` maps each class to its status; a subclass without a row takes its nearest base's
(walk of the MRO, as Starlette does). `install_error_handlers(app)` registers the table
and `responses(...)` makes a route's OpenAPI `responses=` from it. Domain modules raise
these without importing FastAPI; only the two functions at the bottom touch it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sandboxes.base import SandboxBusy, SandboxUnavailable
from verifiers.base import TaskInvalid, UnknownVerifier

if TYPE_CHECKING:
    from fastapi import FastAPI


class ServiceError(Exception):
    """Raised on purpose by the service; its status comes from `STATUS`."""

    headers: ClassVar[dict[str, str]] = {}


class Rejected(ServiceError):
    """The caller must change the request (4xx)."""


class RetryLater(ServiceError):
    """Nothing was done or logged: the same request may succeed after `Retry-After` seconds."""


# -- 401 / 403
class Unauthenticated(Rejected):
    headers = {"WWW-Authenticate": "Bearer"}


class Forbidden(Rejected, PermissionError):
    pass


class EvidenceForbidden(Forbidden):
    """Full evidence of a registered task was asked for by a key without the `audit` scope."""


# -- 404
class NotFound(Rejected, LookupError):
    pass


class TaskNotFound(NotFound):
    pass


class RecordNotFound(NotFound):
    pass


class EvalNotFound(NotFound):
    pass


class RunNotFound(NotFound):
    pass


class DiffNotFound(NotFound):
    pass


class KeyNotFound(NotFound):
    pass


class EnvSessionNotFound(NotFound):
    pass


# -- 409
class Conflict(Rejected):
    pass


class TaskConflict(Conflict):
    """A task id is already registered with different content."""


class RequestIdConflict(Conflict):
    """A `request_id` was reused for a different request."""


class LabelLimit(Conflict):
    """The record already carries the most labels one record may have."""


class EnvSessionConflict(Conflict):
    pass


# -- 422
class RequestInvalid(Rejected, ValueError):
    """A request breaks a service limit; the message names the field."""


class TooBigToFit(RequestInvalid):
    """One group alone holds more responses than may ever be in flight."""


class IdempotencyConflict(RequestInvalid):
    """An idempotency key was reused with a different request."""


class EnvSessionTooLarge(RequestInvalid):
    pass


# -- 429
class EnvSessionLimit(Rejected):
    """This key holds as many open sessions as it may: finish or delete one (no retry helps)."""


# -- retry later
class Saturated(RetryLater):
    """Too much work in flight."""


class Unverified(RetryLater):
    """Some responses got verdict `error` and the caller asked for a failure rather than reward 0."""


class AuditWriteFailed(RetryLater):
    """The records of a request could not be written: the request must not be answered as if
    they were (the cause is in the service log)."""


class EnvSessionsFull(RetryLater):
    """The service holds as many open sessions as it may."""


@dataclass(frozen=True)
class Status:
    code: int
    # The reason counted in `assay_unavailable_total` (None: not counted there); such rows,
    # like every `RetryLater`, are answered with Retry-After.
    unavailable: str | None = None


STATUS: dict[type[Exception], Status] = {
    Unauthenticated: Status(401), Forbidden: Status(403), NotFound: Status(404), Conflict: Status(409),
    RequestInvalid: Status(422), TaskInvalid: Status(422), UnknownVerifier: Status(422),
    EnvSessionLimit: Status(429), EnvSessionsFull: Status(429),
    Saturated: Status(503, "saturated"), Unverified: Status(503), AuditWriteFailed: Status(503, "audit_write_failed"),
    SandboxBusy: Status(503, "sandbox_busy"), SandboxUnavailable: Status(503, "sandbox_unavailable"),
}
# Every route may answer these (the edge guard and the auth dependency).
COMMON = (401, 403, 413, 422)


def status_of(exc: BaseException | type[BaseException]) -> Status | None:
    """The row of the exception's nearest class that has one."""
    cls = exc if isinstance(exc, type) else type(exc)
    return next((STATUS[c] for c in cls.__mro__ if c in STATUS), None)


def responses(*raised: type[Exception]) -> dict[int | str, dict[str, Any]]:
    """A route's OpenAPI `responses=`: the common statuses plus those of what it raises."""
    from service.schemas import ErrorOut

    codes = set(COMMON)
    for cls in raised:
        found = status_of(cls)
        assert found is not None, f"{cls.__name__} has no row in service.errors.STATUS"
        codes.add(found.code)
    return {code: {"model": ErrorOut} for code in sorted(codes)}


# -- validation messages: one format for every place that reports pydantic's errors
def problems(errors: Iterable[dict[str, Any]], where: str = "", empty: str = "") -> list[dict[str, str]]:
    """pydantic's errors as [{field, message}]: the field path joined with dots, under `where`."""
    out = []
    for e in errors:
        path = ".".join(str(p) for p in e["loc"]) or empty
        out.append({"field": f"{where}.{path}" if where and path else (where or path), "message": e["msg"]})
    return out


def summary(found: Sequence[dict[str, str]]) -> str:
    return "; ".join(f"{p['field']}: {p['message']}" for p in found)


def install_error_handlers(app: FastAPI, retry_after_s: int,
                           on_unavailable: Callable[[Any, str], None] | None = None) -> None:
    """Register `STATUS` on the app: `{"detail": message}`, Retry-After on 429/503 rows that
    are `RetryLater` (or a sandbox's busy/unavailable)."""
    from fastapi import Request

    from service.json_response import SafeJSONResponse
    from service.validation import printable

    def handler(request: Request, exc: Exception) -> SafeJSONResponse:
        status = status_of(exc)
        assert status is not None
        headers = dict(getattr(exc, "headers", {}) or {})
        if isinstance(exc, RetryLater) or status.unavailable is not None:
            headers["Retry-After"] = str(retry_after_s)
        if status.unavailable is not None and on_unavailable is not None:
            on_unavailable(request, status.unavailable)
        return SafeJSONResponse({"detail": printable(str(exc))}, status_code=status.code, headers=headers or None)

    for cls in STATUS:
        app.add_exception_handler(cls, handler)
