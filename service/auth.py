"""API keys: `ak_<key_id>_<secret>`, stored as a SHA-256 of the secret, with scopes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from dataclasses import dataclass

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.errors import Forbidden, Unauthenticated
from service.store import AuditStore

SCOPES = ("reward", "audit", "review", "admin")
# Where the ASGI guard (service/edge.py) leaves the caller it authenticated before the body was read.
CALLER_SCOPE_KEY = "assay.caller"
_bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer ak_...`")


@dataclass(frozen=True)
class Caller:
    key_id: str
    scopes: frozenset[str]
    name: str | None = None

    @property
    def author(self) -> str:
        """Who a label is by: the key's name, else its id."""
        return self.name or self.key_id


class InvalidScopes(ValueError):
    pass


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(store: AuditStore, scopes: list[str], name: str | None = None) -> str:
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise InvalidScopes(f"scopes must be a non-empty subset of {list(SCOPES)}; unknown: {unknown}")
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    store.add_key(key_id, _hash(secret), sorted(set(scopes)), name)
    return f"ak_{key_id}_{secret}"


def _split(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a token `ak_<id>_<secret>`; None for anything else."""
    parts = token.split("_", 2)
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "ak" else None


def _caller(key_id: str, secret: str, secret_hash: str, scopes: str, name: str | None, revoked: bool) -> Caller | None:
    """The one rule for a stored key: not revoked and the secret's hash matches."""
    if revoked or not hmac.compare_digest(secret_hash, _hash(secret)):
        return None
    return Caller(key_id, frozenset(scopes.split(",")), name)


def authenticate(store: AuditStore, token: str) -> Caller | None:
    split = _split(token)
    row = store.key(split[0]) if split else None
    if split is None or row is None:
        return None
    return _caller(row.key_id, split[1], row.secret_hash, row.scopes, row.name, row.revoked)


# `authenticate_on_loop`'s answer when it could not read the key where it runs (not a SQLite
# file, or the file busy): the caller then reads it on a worker thread (`authenticate`).
NOT_READ = object()


def authenticate_on_loop(store: AuditStore, token: str) -> Caller | None | object:
    """`authenticate` without a thread, where the store is a SQLite file; `NOT_READ` otherwise."""
    reader = store.loop_keys
    if reader is None:
        return NOT_READ
    split = _split(token)
    if split is None:
        return None
    try:
        found = reader.read(split[0])
    except sqlite3.Error:  # busy, or not readable from here: the worker thread's path decides
        return NOT_READ
    if found is None:
        return None
    return _caller(split[0], split[1], found["secret_hash"], found["scopes"], found["name"],
                   bool(found["revoked"] or found["revocation"]))


def require_scope(scope: str):
    """FastAPI dependency: the caller must hold `scope` (admin holds every scope).

    Async, so that FastAPI calls it on the event loop: the edge guard (service/edge.py) has
    already found the caller of every `/v1/` request, and a sync dependency would cost each
    request a hop to the thread pool. Only a request the guard did not see reads the key from
    the store, on a worker thread. `dependency.check(request, credentials)` is the same check,
    blocking, for code that calls it directly."""

    def check(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Caller:
        caller = request.scope.get(CALLER_SCOPE_KEY)
        if caller is None:
            if credentials is None:
                raise Unauthenticated("missing API key: send `Authorization: Bearer <key>`")
            caller = authenticate(request.app.state.store, credentials.credentials)
        if caller is None:
            raise Unauthenticated("invalid or revoked API key")
        if scope not in caller.scopes and "admin" not in caller.scopes:
            raise Forbidden(f"this API key lacks the {scope!r} scope")
        request.state.key_id = caller.key_id  # for the access log line (never the key itself)
        return caller

    async def dependency(request: Request,
                         credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Caller:
        if request.scope.get(CALLER_SCOPE_KEY) is None and credentials is not None:
            return await anyio.to_thread.run_sync(check, request, credentials)
        return check(request, credentials)

    dependency.check = check  # type: ignore[attr-defined]
    return dependency
