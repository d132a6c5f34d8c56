"""The ASGI guard in front of every route: bounded work before the app sees a request.

In order, before the application reads a byte of the body:

1. `/v1/` routes: the API key (Authorization: Bearer, or `?api_key=` on `/v1/openrlhf`)
   must be a valid, unrevoked key, else 401. No body is read for a caller without one.
2. The body is read up to `max_body_bytes`, whether declared by Content-Length or sent
   chunked; one byte more is a 413 naming the limit.
3. A JSON body may nest at most `max_json_depth` arrays and objects (422 otherwise):
   measured on the bytes, before any parser recurses into it; an integer literal longer
   than Python reads (4,300 digits) is a 422 naming its field.

The request then reaches the app with its body buffered, the caller found here (routes
reuse it instead of reading the key again) and the request limits set for the models'
validators (`service.validation.request_limits`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from urllib.parse import parse_qs

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.auth import CALLER_SCOPE_KEY, NOT_READ, Caller, authenticate, authenticate_on_loop
from service.validation import RequestLimits, bad_value, parse_long_integers, request_limits

# A JSON string, escapes included (the unrolled form: no backtracking on long strings).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_INNERMOST = re.compile(rb"\[\]|\{\}")
# An integer literal longer than Python converts (4,300 digits by default): the lookbehind
# starts a match only where a run of digits starts, so a scan is linear in the body.
_LONG_INTEGER = re.compile(rb"(?<![0-9])[0-9]{%d}" % (sys.get_int_max_str_digits() + 1))
# Bodies larger than this have their depth measured on a worker thread.
_SCAN_INLINE_BYTES = 64 * 1024


def json_nesting_problem(body: bytes, limit: int) -> str | None:
    """What is wrong with how a JSON text nests arrays/objects, if anything: deeper than
    `limit`, or brackets that can never balance. Strings are cut out, then every pass removes
    the innermost empty pairs: a text still holding brackets after `limit` passes is deeper
    than `limit`; one that a pass leaves unchanged is not JSON. (The parser would recurse into
    such a text, run out of stack and be answered by a 400 naming nothing.) A short text is
    left to the parser, which names the position of what is wrong."""
    skeleton = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    if len(skeleton) <= limit:
        return None
    for _ in range(limit):
        reduced = _INNERMOST.sub(b"", skeleton)
        if not reduced:
            return None
        if reduced == skeleton:
            return "body: not JSON: its brackets do not balance"
        skeleton = reduced
    return f"body: JSON nested too deep (more than max_json_depth = {limit} levels of arrays and objects)"


def check_text(body: bytes) -> None:
    """A body that is not text in an encoding JSON allows (UTF-8, or UTF-16/32 as the parser
    detects them) is a 422 naming the body: the parser would fail decoding it, and FastAPI
    answer a 400 naming nothing (a gzip-compressed body, for one: nothing here inflates it)."""
    try:
        body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        raise _Refused(422, "body: not JSON text (not UTF-8; a Content-Encoding is not undone here)") from None


class _Refused(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


@dataclass(frozen=True)
class EdgeLimits:
    max_body_bytes: int
    max_json_depth: int
    request: RequestLimits


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


def _query_key(scope: Scope) -> str | None:
    if scope.get("path") != "/v1/openrlhf":
        return None
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("api_key")
    return values[0] if values else None


# /v1/ routes anyone may read without a key: the public half of the receipt key is what a
# trainer checks receipts with, so it must be fetchable before any key is trusted.
PUBLIC_V1_PATHS = frozenset({"/v1/receipts/key"})


class EdgeGuard:
    def __init__(self, app: ASGIApp, limits: EdgeLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_limits.set(self.limits.request)
        try:
            path = scope.get("path", "")
            if path.startswith("/v1/") and path not in PUBLIC_V1_PATHS:
                scope[CALLER_SCOPE_KEY] = await self._caller(scope)
            body = await self._body(scope, receive)
            if body is None:
                return  # the client went away
            if body and path.startswith("/v1/"):
                check_text(body)  # every /v1/ body is JSON
            if body.lstrip()[:1] in (b"{", b"["):
                await self._check_depth(body)
                _check_integers(body)
        except _Refused as refused:
            await _answer(send, refused.status, refused.detail, refused.headers)
            return
        await self.app(scope, replay_body(body, receive), send)

    async def _caller(self, scope: Scope) -> Caller:
        token = _bearer(scope) or _query_key(scope)
        if token is None:
            raise _Refused(401, "missing API key: send `Authorization: Bearer <key>`", {"WWW-Authenticate": "Bearer"})
        store = scope["app"].state.store
        caller = authenticate_on_loop(store, token)  # a SQLite point read, no thread hop
        if caller is NOT_READ:
            caller = await anyio.to_thread.run_sync(authenticate, store, token)
        if caller is None:
            raise _Refused(401, "invalid or revoked API key", {"WWW-Authenticate": "Bearer"})
        return caller

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        limit = self.limits.max_body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise _Refused(413, f"request body exceeds max_body_bytes ({limit} bytes)")
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limit:
                raise _Refused(413, f"request body exceeds max_body_bytes ({limit} bytes)")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _check_depth(self, body: bytes) -> None:
        limit = self.limits.max_json_depth
        if len(body) <= _SCAN_INLINE_BYTES:
            problem = json_nesting_problem(body, limit)
        else:
            problem = await anyio.to_thread.run_sync(json_nesting_problem, body, limit)
        if problem is not None:
            raise _Refused(422, problem)


def _check_integers(body: bytes) -> None:
    """An integer literal too long for Python is a 422 naming its field (the parser would
    raise, and FastAPI answer a 400 naming nothing). Only a body with such a run of digits
    outside its strings is parsed here."""
    if sys.get_int_max_str_digits() == 0 or not _LONG_INTEGER.search(body):
        return
    if not _LONG_INTEGER.search(_JSON_STRING.sub(b'""', body)):
        return  # the digits are inside strings
    try:
        problem = bad_value(json.loads(body, parse_int=parse_long_integers))
    except ValueError:
        return  # not JSON: the app's parser answers
    if problem is not None:
        raise _Refused(422, problem)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """`receive` that hands out `body` (already read) first, then what the client sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: only a disconnect can come

    return replayed


async def _answer(send: Send, status: int, detail: str, headers: dict[str, str]) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
