"""ASGI middleware: a request body is bounded in size (413) and in the time it takes to arrive (408).

A body whose declared or received size is over the limit is answered 413 at once: nothing beyond the limit is
kept in memory, and the server keeps reading and dropping what the client still sends (uvicorn discards the body
of a request that has been answered), so the client reads the 413 instead of a reset connection; the
connection's request-head timer (service/http_server.py) then bounds how long that may take. A connection the
client asked to close (urllib's `Connection: close`) lingers the same way (service/http_server.py). A body that has not
arrived whole within `timeout_s` (a client that declared a length and sends nothing, or trickles) is answered
408 and the connection closed.
"""

from __future__ import annotations

import asyncio
import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 60.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._answer(send, 413, f"request body exceeds {self.max_bytes} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    message = await receive()  # under a timeout, not wait_for: no task per message
            except TimeoutError:
                await self._answer(send, 408, f"the request body did not arrive within {self.timeout_s:g} s",
                                   close=True)
                return
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                chunks.clear()
                await self._answer(send, 413, f"request body exceeds {self.max_bytes} bytes")
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _answer(send: Send, status: int, detail: str, close: bool = False) -> None:
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
