"""Time limits on reading a request, for `assay serve` (uvicorn's httptools protocol).

uvicorn closes a keep-alive connection that sends nothing, but it has no limit on a request
that arrives slowly: a client that sends a request line and one header, then nothing (or a
byte every few seconds), holds a connection and a descriptor for as long as it likes, without
a key (slowloris). So a connection must deliver a request's headers within `header_timeout_s`
of opening (or of the previous response's end), and its body within `body_timeout_s` of the
headers. Past either deadline the server answers 408 where no response has begun, and closes
the connection; the application sees a client that went away, so nothing is judged or written.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
              b"connection: close\r\ncontent-length: 29\r\n\r\nrequest not received in time\n")


class _DeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float
    body_timeout_s: float

    _deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            self.transport.write(_TIMED_OUT)
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._arm(self.body_timeout_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request's headers are due from now, unless a pipelined one is already in.
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm(self.header_timeout_s)


def protocol_with_deadlines(header_timeout_s: float, body_timeout_s: float) -> type[HttpToolsProtocol]:
    """uvicorn's `http` protocol class with these read deadlines."""
    return type("DeadlineProtocol", (_DeadlineProtocol,),
                {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s})
