"""uvicorn, with a bound on the time a client may take to send a request head.

uvicorn's h11 protocol closes a connection that stays idle between requests (`timeout_keep_alive`), but once a
client has sent one byte of a request head it waits for the rest forever: 300 connections sending half a header
each hold 300 sockets for as long as they like (slowloris). `HeadTimeoutProtocol` arms a timer whenever the
connection is between requests (just opened, or its last response sent) and disarms it when a whole request head
has arrived; when it fires, the client gets 408 and the connection is closed. Body read time is bounded by
service/body_limit.py, once a request has started.

A connection closed while the client is still sending its request body (a 413 to a client that sent
`Connection: close`, as urllib does) is closed the way web servers close it (nginx's lingering close): our side
is shut for writing, and what the client still sends is read and dropped for up to `linger_s`, then the socket
is closed. Closing at once would leave unread bytes in the kernel's buffer, and the kernel answers them with a
reset that destroys the answer before the client, still in its send, has read it: urllib and requests then see
`Connection reset by peer` instead of the 413, and retry it as a network fault.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                   b"content-length: 55\r\n\r\n" b'{"detail": "the request head did not arrive in time"}\r\n')


class LingeringTransport:
    """The connection's transport as uvicorn sees it: the same, except that close() lingers while the client is
    still sending a request body (see the module docstring)."""

    def __init__(self, transport: asyncio.Transport, protocol: HeadTimeoutProtocol) -> None:
        self._transport, self._protocol = transport, protocol
        self.lingering = False
        self._timer: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def close(self) -> None:
        if self.lingering or self._transport.is_closing():
            return
        if self._protocol.conn.their_state is not h11.SEND_BODY or not self._transport.can_write_eof():
            self._transport.close()
            return
        self.lingering = True  # from here on, data_received drops what comes
        self._transport.write_eof()  # the answer goes out whole, then a FIN: the client reads it after sending
        self._transport.resume_reading()
        self._timer = self._protocol.loop.call_later(self._protocol.linger_s, self.abort_linger)

    def abort_linger(self) -> None:
        self._timer = None
        self._transport.close()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def pause_reading(self) -> None:
        if not self.lingering:
            self._transport.pause_reading()


class HeadTimeoutProtocol(H11Protocol):
    head_timeout_s = 10.0
    linger_s = 5.0  # nginx's lingering_timeout: 5 s

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._lingering: LingeringTransport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = LingeringTransport(transport, self)
        super().connection_made(self._lingering)  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._lingering is not None:
            self._lingering.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None and self._lingering.lingering:
            return  # the rest of a body we have answered already: dropped
        super().data_received(data)

    def eof_received(self) -> None:
        if self._lingering is not None and self._lingering.lingering:
            self._lingering.abort_linger()  # the client has sent everything and read our answer
        super().eof_received()

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
