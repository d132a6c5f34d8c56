"""A lane of their own for the two reward routes, `POST /v1/verify` and `POST /v1/groups`.

Behind the edge guard (service/edge.py: the caller found, the body read within
max_body_bytes, its depth measured), a well-formed reward request does not need the rest of
the generic stack: five more ASGI layers, the router's match, FastAPI's body reading,
content-type parsing and dependency solving (docs/benchmarks.md, "Fifth pass"). This lane
does for such a request what those layers would do, with the same code:

- the body is parsed as FastAPI parses it (`json.loads` of the bytes) and validated by the
  route's own model (`model_validate`, as FastAPI's body field does);
- the caller's scope is checked by the route's own dependency (`require_scope("reward")`);
- the route function itself (service/routes/verify.py) makes the answer;
- a service error is answered by the app's own exception handler for it (service/errors.py);
  anything else propagates, as it would have, to the outermost ServerErrorMiddleware (500).

Anything else — another path or method, a content type other than JSON, a body that does not
parse or validate, an Idempotency-Key FastAPI would refuse, a request the guard did not
authenticate, dependency overrides (tests) — goes down the generic stack with its body,
untouched: every refusal is FastAPI's own, word for word (tests/test_hot_routes.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from service.auth import CALLER_SCOPE_KEY, require_scope
from service.deps import IDEMPOTENCY_KEY_MAX
from service.edge import replay_body
from service.routes import verify as reward_routes
from service.schemas import GroupsRequest, VerifyRequest

_reward_scope = require_scope("reward").check  # type: ignore[attr-defined]
_Call = Callable[[Request, Any, Any], Awaitable[Any]]


def _route(path: str) -> Any:
    return next(r for r in reward_routes.router.routes if getattr(r, "path", None) == path)


async def _verify(request: Request, body: Any, caller: Any) -> Any:
    return await reward_routes.verify(body, request.app.state.pipeline, caller)


async def _groups(request: Request, body: Any, caller: Any) -> Any:
    key = request.headers.get("idempotency-key")
    return await reward_routes.groups(body, request.app.state.pipeline, caller, key)


# path -> (the route's body model, the call, the route object the access log and metrics name)
_LANES: dict[str, tuple[type[BaseModel], _Call, Any]] = {
    "/v1/verify": (VerifyRequest, _verify, _route("/v1/verify")),
    "/v1/groups": (GroupsRequest, _groups, _route("/v1/groups")),
}


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


def _idempotency_ok(scope: Scope) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"idempotency-key":
            return 0 < len(value) <= IDEMPOTENCY_KEY_MAX  # longer is FastAPI's 422
    return True


class RewardLane:
    """ASGI middleware, installed just inside the edge guard (service/app.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lane = _LANES.get(scope.get("path", "")) if scope["type"] == "http" else None
        if (lane is None or scope.get("method") != "POST" or scope.get("root_path") or not _is_json(scope)
                or scope.get(CALLER_SCOPE_KEY) is None or scope["app"].dependency_overrides):
            await self.app(scope, receive, send)
            return
        model, call, route = lane
        body = await _read(receive)
        if body is None:
            return  # the client went away
        try:
            parsed = model.model_validate(json.loads(body)) if body else None
        except Exception:  # noqa: BLE001 - not JSON, or not valid: the generic stack gives its own answer
            parsed = None
        if parsed is None or (model is GroupsRequest and not _idempotency_ok(scope)):
            await self.app(scope, replay_body(body, receive), send)  # FastAPI's own answer
            return
        scope["route"] = route
        request = Request(scope, receive, send)
        try:
            response = await call(request, parsed, _reward_scope(request, None))
        except Exception as exc:
            handler = _handler(scope["app"].exception_handlers, exc)
            if handler is None:
                raise
            response = handler(request, exc)
            if isinstance(response, Awaitable):
                response = await response
        await response(scope, receive, send)


def _handler(handlers: dict[Any, Any], exc: Exception) -> Any:
    """The app's handler for `exc`'s nearest class (as Starlette's exception middleware finds it)."""
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)


async def _read(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)

