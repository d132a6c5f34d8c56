"""The audit viewer: server-rendered pages under /ui/ over the audit store.

`install(app)` adds the pages and the security headers every viewer response carries.
"""

from __future__ import annotations

import time

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.ui.pages import NotSignedIn, router, to_sign_in
from service.ui.run_pages import router as run_router

# No inline script or style, nothing from another origin; pages may not be framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.include_router(run_router)
    app.add_exception_handler(NotSignedIn, to_sign_in)

    app.add_middleware(ViewerHeaders)


class ViewerHeaders:
    """ASGI middleware: the security headers and Server-Timing of viewer pages. A plain ASGI
    wrapper (not `@app.middleware("http")`, whose per-request streams and task group cost every
    API request about a millisecond): other paths pass straight through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == "/ui" or path.startswith("/ui/")):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                # The server's own share of a page's time (the records page's budget is 300 ms).
                headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
                for name, value in _HEADERS.items():
                    headers.setdefault(name, value)
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)
