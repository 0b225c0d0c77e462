"""Request bodies parsed by pydantic's JSON parser (jiter) instead of json.loads, with the same results and errors.

An io item's body is megabytes of stdin: json.loads spends ~8 ms on a 9 MB CodeContests item, pydantic_core's
`from_json` ~1.5 ms (measured in one process, issue 25), and Starlette's body() copies the body once more.
FastAPI reads a JSON body through `Request.json()`, so routes of `JSONRoute` get a request whose `json()` tries
from_json first and whose `body()` does not copy. Where from_json refuses a body (malformed JSON, a lone
surrogate escape, text that is not UTF-8, nesting past its limit), json.loads parses it as before, so a body
json.loads accepted is still accepted and one it refused still gets FastAPI's own 4xx (`json_invalid` at its
position). Where both accept a body they give the same value (checked over tricky texts and 60,000 floats in
tests/test_json_body_units.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from contextlib import aclosing
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic_core import from_json


def parse(body: bytes) -> Any:
    """body as json.loads reads it: the same value, or json.loads's own error."""
    try:
        return from_json(body)
    except ValueError:
        return json.loads(body)


class JSONRequest(Request):
    async def body(self) -> bytes:
        """Starlette's body() joins the chunks with the empty one that ends the stream: a copy of the whole body
        (BodyLimit, service/body_limit.py, hands the app one chunk). Without the empty ones, one chunk is itself."""
        if not hasattr(self, "_body"):
            async with aclosing(self.stream()) as stream:
                self._body = b"".join([chunk async for chunk in stream if chunk])
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse(await self.body())
        return self._json


class JSONRoute(APIRoute):
    """A route whose JSON body is read by `parse` (FastAPI's documented custom Request / APIRoute pattern)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(JSONRequest(request.scope, request.receive))

        return route
