"""Viewer sign-in: an API key is exchanged once for a session cookie; forms carry a CSRF token.

The cookie holds a random token (httpOnly, SameSite=Strict); the store keeps only its hash,
the key id and the session's CSRF token, so signing out ends the session on every replica.
The key is re-checked on every request, so revoking it ends its sessions too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastapi import Request
from fastapi.responses import Response

from service.auth import authenticate
from service.store import AuditStore
from service.tables import UiSessionRow

SESSION_COOKIE = "assay_session"
LOGIN_CSRF_COOKIE = "assay_login_csrf"
COOKIE_PATH = "/ui"
VIEW_SCOPE = "audit"


@dataclass(frozen=True)
class Viewer:
    key_id: str
    name: str | None
    scopes: frozenset[str]
    csrf_token: str
    token_hash: str

    def may(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes


class SignInRefused(Exception):
    """The key is unknown, revoked, or lacks the audit scope (the message never repeats the key)."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def sign_in(store: AuditStore, api_key: str, hours: float) -> str:
    """Check the key and open a session; returns the cookie token."""
    caller = authenticate(store, api_key.strip())
    if caller is None:
        raise SignInRefused("this API key is unknown or revoked")
    if VIEW_SCOPE not in caller.scopes and "admin" not in caller.scopes:
        raise SignInRefused(f"this API key lacks the {VIEW_SCOPE!r} scope")
    token = secrets.token_urlsafe(32)
    store.add_ui_session(UiSessionRow(token_hash=_hash(token), key_id=caller.key_id,
                                      csrf_token=secrets.token_urlsafe(32),
                                      expires_at=datetime.now(UTC) + timedelta(hours=hours)))
    return token


def set_session_cookie(response: Response, request: Request, token: str, hours: float) -> None:
    _set_cookie(response, request, SESSION_COOKIE, token, int(hours * 3600))
    response.delete_cookie(LOGIN_CSRF_COOKIE, path=COOKIE_PATH)


def sign_out(store: AuditStore, viewer: Viewer, response: Response) -> None:
    store.drop_ui_session(viewer.token_hash)
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)


def current_viewer(request: Request) -> Viewer | None:
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    store: AuditStore = request.app.state.store
    session = store.ui_session(_hash(token))
    if session is None:
        return None
    key = store.key(session.key_id)
    if key is None or key.revoked:
        return None
    return Viewer(key.key_id, key.name, frozenset(key.scopes.split(",")), session.csrf_token, session.token_hash)


def login_csrf_token(request: Request) -> str:
    """Double-submit token for the sign-in form (there is no session yet to hold one)."""
    return request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(32)


def set_login_csrf_cookie(response: Response, request: Request, token: str) -> None:
    _set_cookie(response, request, LOGIN_CSRF_COOKIE, token, 3600)


def _same_origin(request: Request) -> bool:
    """A browser sends Origin on cross-site posts; when present it must be this site."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return origin == f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


def csrf_ok(request: Request, expected: str | None, submitted: str | None) -> bool:
    return (bool(expected) and bool(submitted) and _same_origin(request)
            and hmac.compare_digest(str(expected), str(submitted)))
