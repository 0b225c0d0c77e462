"""uvicorn, with a bound on the time a client may take to send a request head.

uvicorn's h11 protocol closes a connection that stays idle between requests (`timeout_keep_alive`), but once a
client has sent one byte of a request head it waits for the rest forever: 300 connections sending half a header
each hold 300 sockets for as long as they like (slowloris). `HeadTimeoutProtocol` arms a timer whenever the
connection is between requests (just opened, or its last response sent) and disarms it when a whole request head
has arrived; when it fires, the client gets 408 and the connection is closed. Body read time is bounded by
service/body_limit.py, once a request has started.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                   b"content-length: 55\r\n\r\n" b'{"detail": "the request head did not arrive in time"}\r\n')


class HeadTimeoutProtocol(H11Protocol):
    head_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a whole request head arrived
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()  # before super(): a pipelined request it starts disarms the timer again
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()


def serve(app: Any, host: str, port: int, log_level: str, head_timeout_s: float) -> None:
    protocol = type("HeadTimeout", (HeadTimeoutProtocol,), {"head_timeout_s": head_timeout_s})
    uvicorn.run(app, host=host, port=port, log_level=log_level, http=protocol)
