"""Typed HTTP clients for rewardbox: `Client` (sync) and `AsyncClient` (asyncio), same surface, same names.

Retries with exponential back-off (honouring Retry-After) on 429, 503 and 504 and on connection errors; any other
status raises `RewardboxError`. Item results are returned as the service sends them: `reward` is None for
`infra_error` and `invalid_input`, so callers pass None on instead of training on it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import httpx

RETRY_STATUSES = {429, 503, 504}


class RewardboxError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"rewardbox answered {status}: {body[:500]}")
        self.status = status
        self.body = body


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("REWARDBOX_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _delay(response: httpx.Response | None, attempt: int, backoff: float) -> float:
    if response is not None and response.headers.get("Retry-After", "").isdigit():
        return float(response.headers["Retry-After"])
    return backoff * (2**attempt)


class _Options:
    """What both clients are configured with: service URL (REWARDBOX_URL), token (REWARDBOX_TOKEN), retries."""

    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = 300.0,
                 retries: int = 5, backoff: float = 0.5) -> None:
        self.base_url = base_url or os.environ.get("REWARDBOX_URL", "http://127.0.0.1:8000")
        self.retries, self.backoff = retries, backoff
        self._http_options = {"base_url": self.base_url, "timeout": timeout, "headers": _headers(token)}


class Client(_Options):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = httpx.Client(**self._http_options)

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = self._http.post(path, json=payload)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
                time.sleep(_delay(None, attempt, self.backoff))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                time.sleep(_delay(response, attempt, self.backoff))
                continue
            if response.status_code != 200:
                raise RewardboxError(response.status_code, response.text)
            return response.json()
        raise AssertionError("unreachable")

    def reward(self, item: dict[str, Any]) -> dict[str, Any]:
        return self._post("/reward", item)

    def reward_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._post("/reward/batch", {"items": items})["results"] if items else []

    def run_code(self, **request: Any) -> dict[str, Any]:
        return self._post("/run_code", request)

    def info(self) -> dict[str, Any]:
        return self._http.get("/v1/info").raise_for_status().json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Options):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = httpx.AsyncClient(**self._http_options)

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.post(path, json=payload)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
                await asyncio.sleep(_delay(None, attempt, self.backoff))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                await asyncio.sleep(_delay(response, attempt, self.backoff))
                continue
            if response.status_code != 200:
                raise RewardboxError(response.status_code, response.text)
            return response.json()
        raise AssertionError("unreachable")

    async def reward(self, item: dict[str, Any]) -> dict[str, Any]:
        return await self._post("/reward", item)

    async def reward_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return (await self._post("/reward/batch", {"items": items}))["results"] if items else []

    async def run_code(self, **request: Any) -> dict[str, Any]:
        return await self._post("/run_code", request)

    async def info(self) -> dict[str, Any]:
        return (await self._http.get("/v1/info")).raise_for_status().json()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
