"""The audit viewer: server-rendered pages under /ui/ over the audit store.

`install(app)` adds the pages and the security headers every viewer response carries.
"""

from __future__ import annotations

import time

from fastapi import FastAPI, Request

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

    @app.middleware("http")
    async def _viewer_headers(request: Request, call_next):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        response = await call_next(request)
        if request.url.path == "/ui" or request.url.path.startswith("/ui/"):
            # The server's own share of a page's time (the records page's budget is 300 ms).
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            for name, value in _HEADERS.items():
                response.headers.setdefault(name, value)
            response.headers.setdefault("Cache-Control", "no-store")
        return response
