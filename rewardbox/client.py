"""Typed HTTP clients for rewardbox: `Client` (sync) and `AsyncClient` (asyncio), same surface, same names.

Retries with exponential back-off on 429, 502, 503 and 504 and on transport errors, honouring `Retry-After` up to
`max_retry_after_s` (a proxy that says "come back tomorrow" must not put a trainer to sleep for a day). Item
results are returned as the service sends them: `reward` is None for `infra_error` and `invalid_input`, so callers
pass None on instead of training on it. A batch answer is checked to hold one result per item, in order, so
rewards can never be misaligned with samples. A batch over the service's limits (items, queued test cases, body
size) is cut into parts sent two at a time and put back together in order (rewardbox/batching.py): the limits
are learned from `GET /v1/info` the first time the service refuses a batch as too large, so a batch within them
costs no extra request.

Every failure is a `RewardboxError`; the caller never sees an httpx, JSON or KeyError exception:

    RewardboxError
    ├── TransportError    the service could not be reached, or the connection broke (after the retries)
    ├── HTTPStatusError   it answered another status than 200 (after the retries): `.status`, `.body`
    └── BadResponse       it answered 200 with a body that is not what the route returns

Both clients share `_Policy`, which makes every decision that is not I/O (retry or not, how long to wait, is the
body well formed); the two classes only do the waiting and the sending.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from .batching import IN_FLIGHT, BatchLimits, item_work, parts
from .encoding import encode

RETRY_STATUSES = {429, 502, 503, 504}
MAX_RETRY_AFTER_S = 60.0
MAX_BACKOFF_S = 30.0
GZIP = {"Content-Type": "application/gzip"}  # POST /repos takes the archive as it is
JSON = {"Content-Type": "application/json"}  # bodies encoded here (rewardbox/encoding.py), not by httpx


class RewardboxError(RuntimeError):
    """Any failure of a rewardbox call."""


class TransportError(RewardboxError):
    """The service could not be reached, or the connection broke, on every try."""


class HTTPStatusError(RewardboxError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"rewardbox answered {status}: {body[:500]}")
        self.status = status
        self.body = body


class BadResponse(RewardboxError):
    """A 200 whose body is not what the route returns (not JSON, a field missing, a result count that differs)."""


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("REWARDBOX_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


class _Policy:
    """What both clients are configured with (service URL from REWARDBOX_URL, token from REWARDBOX_TOKEN,
    retries) and every decision that does not touch the network."""

    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = 300.0,
                 retries: int = 5, backoff: float = 0.5, max_retry_after_s: float = MAX_RETRY_AFTER_S) -> None:
        self.base_url = base_url or os.environ.get("REWARDBOX_URL", "http://127.0.0.1:8000")
        self.retries, self.backoff, self.max_retry_after_s = retries, backoff, max_retry_after_s
        self._http_options: dict[str, Any] = {"base_url": self.base_url, "timeout": timeout, "headers": _headers(token)}
        self.limits: BatchLimits | None = None  # the service's batch limits, once a batch was refused as too large

    def delay(self, response: httpx.Response | None, attempt: int) -> float:
        """Retry-After when the service says it (capped), else exponential back-off (capped)."""
        given = response.headers.get("Retry-After", "").strip() if response is not None else ""
        try:
            seconds = float(given)
        except ValueError:
            seconds = -1.0
        if seconds >= 0:
            return min(seconds, self.max_retry_after_s)
        return min(self.backoff * (2**attempt), MAX_BACKOFF_S)

    def retry(self, response: httpx.Response | None, attempt: int) -> bool:
        if attempt >= self.retries:
            return False
        return response is None or response.status_code in RETRY_STATUSES

    @staticmethod
    def body(response: httpx.Response, ok: tuple[int, ...] = (200,)) -> Any:
        if response.status_code not in ok:
            raise HTTPStatusError(response.status_code, response.text)
        try:
            return response.json()
        except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError
            raise BadResponse(f"{response.request.url.path}: the body is not JSON ({e}): {response.text[:200]}"
                              ) from None

    @staticmethod
    def item_result(value: Any, where: str = "result") -> dict[str, Any]:
        if not isinstance(value, dict) or not isinstance(value.get("status"), str) or "reward" not in value:
            raise BadResponse(f"{where} is not an item result (status and reward expected): {str(value)[:200]}")
        return value

    @classmethod
    def batch_results(cls, body: Any, count: int) -> list[dict[str, Any]]:
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise BadResponse(f"the batch answer has no results list: {str(body)[:200]}")
        if len(results) != count:
            raise BadResponse(f"{count} items sent, {len(results)} results received: rewards would not line up "
                              "with their samples")
        return [cls.item_result(r, f"result {i}") for i, r in enumerate(results)]

    @staticmethod
    def too_large(error: HTTPStatusError) -> bool:
        """The service refused a batch for its size (413, or 422 on `items` as too long): it can be split."""
        if error.status == 413:
            return True
        try:
            detail = json.loads(error.body).get("detail")
        except (ValueError, AttributeError):
            return False
        return error.status == 422 and isinstance(detail, list) and any(
            isinstance(d, dict) and d.get("type") == "too_long" and d.get("loc") == ["body", "items"]
            for d in detail)

    def plan(self, items: list[dict[str, Any]], info: Any = None, defaults: dict[str, Any] | None = None
             ) -> tuple[list[bytes], list[range], bytes] | None:
        """Each item's JSON, the parts to send them in, and the head every part's body starts with (the defaults,
        encoded once); None when the limits are unknown (after learning them from `info`, the body of /v1/info,
        when given)."""
        if info is not None:
            self.limits = BatchLimits.from_info(info)
        if self.limits is None:
            return None
        encoded = [encode(item) for item in items]
        head = b'{"defaults":' + encode(defaults) + b',"items":[' if defaults else b'{"items":['
        limits = self.limits
        if defaults and limits.max_body_bytes:  # every part carries the defaults once
            room = limits.max_body_bytes - IN_FLIGHT * len(head)
            limits = BatchLimits(limits.max_batch, limits.max_queued, max(1, room))
        works = [item_work({**defaults, **item} if defaults and isinstance(item, dict) else item) for item in items]
        return encoded, parts(works, limits, [len(e) for e in encoded]), head

    @staticmethod
    def part_body(encoded: list[bytes], part: range, head: bytes) -> bytes:
        return head + b",".join(encoded[part.start:part.stop]) + b"]}"

    @staticmethod
    def batch_body(items: list[dict[str, Any]], defaults: dict[str, Any] | None) -> dict[str, Any]:
        return {"defaults": defaults, "items": items} if defaults else {"items": items}

    @staticmethod
    def mapping(body: Any, where: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadResponse(f"{where}: a JSON object expected, got {str(body)[:200]}")
        return body

    @classmethod
    def repo_id(cls, body: Any) -> str:
        repo_id = cls.mapping(body, "/repos").get("id")
        if not isinstance(repo_id, str):
            raise BadResponse(f"/repos: no repository id in {str(body)[:200]}")
        return repo_id

    @staticmethod
    def export_line(line: str) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except ValueError as e:
            raise BadResponse(f"export: a line is not JSON ({e})") from None
        if not isinstance(record, dict):
            raise BadResponse("export: a line is not a rollout object")
        return record


class Client(_Policy):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = httpx.Client(**self._http_options)

    def _request(self, method: str, path: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as e:
                if not self.retry(None, attempt):
                    raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from e
                time.sleep(self.delay(None, attempt))
                continue
            except httpx.HTTPError as e:  # invalid URL and the like: no retry helps
                raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from e
            if self.retry(response, attempt):
                time.sleep(self.delay(response, attempt))
                continue
            return self.body(response, ok)
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        """Any route (agent sessions use it: rewardbox/sessions.py): the JSON body of an answer whose status is in
        ok, with the retry policy of every call."""
        return self._request(method, path, ok, **kwargs)

    def reward(self, item: dict[str, Any]) -> dict[str, Any]:
        return self.item_result(self._request("POST", "/reward", content=encode(item), headers=JSON))

    def reward_batch(self, items: list[dict[str, Any]], defaults: dict[str, Any] | None = None
                     ) -> list[dict[str, Any]]:
        """One result per item, in order, however many items: a batch over the service's limits goes in parts.
        defaults: fields every item takes unless it sets them (a GRPO group's tests and profile), sent once."""
        if not items:
            return []
        plan = self.plan(items, defaults=defaults)
        if plan is None:
            try:
                return self.batch_results(self._request("POST", "/reward/batch", headers=JSON,
                                                        content=encode(self.batch_body(items, defaults))), len(items))
            except HTTPStatusError as e:
                if not self.too_large(e) or (plan := self.plan(items, self.info(), defaults)) is None:
                    raise
        encoded, ranges, head = plan

        def send(part: range) -> list[dict[str, Any]]:
            body = self._request("POST", "/reward/batch", content=self.part_body(encoded, part, head), headers=JSON)
            return self.batch_results(body, len(part))

        if len(ranges) == 1:
            return send(ranges[0])
        pool = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="rewardbox-batch")
        try:
            return [result for part in pool.map(send, ranges) for result in part]
        finally:
            pool.shutdown(cancel_futures=True)  # after a failure, the parts not yet sent are not sent

    def run_code(self, **request: Any) -> dict[str, Any]:
        return self.mapping(self._request("POST", "/run_code", json=request), "/run_code")

    def upload_repo(self, archive: bytes) -> str:
        """POST /repos: store a repository snapshot (a .tar.gz, e.g. rewardbox.archive.repo_archive) and return its
        id, the sha256 of the archive (the same archive twice: the same id, one copy kept)."""
        body = self._request("POST", "/repos", (200, 201), content=archive, headers=GZIP)
        return self.repo_id(body)

    def info(self) -> dict[str, Any]:
        return self.mapping(self._request("GET", "/v1/info"), "/v1/info")

    def rollouts(self, **params: Any) -> dict[str, Any]:
        """One page of GET /rollouts (failed, status, language, since, limit, cursor)."""
        return self.mapping(self._request("GET", "/rollouts", params=params), "/rollouts")

    def replay(self, rollout_id: str) -> dict[str, Any]:
        return self.mapping(self._request("POST", f"/rollouts/{rollout_id}/replay"), "replay")

    def record_run(self, name: str, summary: dict[str, Any]) -> int:
        body = self.mapping(self._request("POST", "/runs", json={"name": name, "summary": summary}), "/runs")
        if not isinstance(body.get("id"), int):
            raise BadResponse(f"/runs: no run id in {str(body)[:200]}")
        return body["id"]

    def export(self, **params: Any) -> Iterator[dict[str, Any]]:
        """Every rollout GET /rollouts/export streams, one dict per line (no retry: a stream cannot resume)."""
        try:
            with self._http.stream("GET", "/rollouts/export", params=params) as response:
                if response.status_code != 200:
                    response.read()
                    raise HTTPStatusError(response.status_code, response.text)
                for line in response.iter_lines():
                    if line:
                        yield self.export_line(line)
        except httpx.HTTPError as e:
            raise TransportError(f"export: {type(e).__name__}: {e}") from e

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Policy):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = httpx.AsyncClient(**self._http_options)

    async def _request(self, method: str, path: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError as e:
                if not self.retry(None, attempt):
                    raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from e
                await asyncio.sleep(self.delay(None, attempt))
                continue
            except httpx.HTTPError as e:
                raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from e
            if self.retry(response, attempt):
                await asyncio.sleep(self.delay(response, attempt))
                continue
            return self.body(response, ok)
        raise AssertionError("unreachable")

    async def call(self, method: str, path: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        return await self._request(method, path, ok, **kwargs)

    async def reward(self, item: dict[str, Any]) -> dict[str, Any]:
        return self.item_result(await self._request("POST", "/reward", content=encode(item), headers=JSON))

    async def reward_batch(self, items: list[dict[str, Any]], defaults: dict[str, Any] | None = None
                           ) -> list[dict[str, Any]]:
        """One result per item, in order, however many items: a batch over the service's limits goes in parts.
        defaults: fields every item takes unless it sets them (a GRPO group's tests and profile), sent once."""
        if not items:
            return []
        plan = self.plan(items, defaults=defaults)
        if plan is None:
            try:
                return self.batch_results(await self._request("POST", "/reward/batch", headers=JSON,
                                                              content=encode(self.batch_body(items, defaults))),
                                          len(items))
            except HTTPStatusError as e:
                if not self.too_large(e) or (plan := self.plan(items, await self.info(), defaults)) is None:
                    raise
        encoded, ranges, head = plan
        in_flight = asyncio.Semaphore(IN_FLIGHT)

        async def send(part: range) -> list[dict[str, Any]]:
            async with in_flight:
                body = await self._request("POST", "/reward/batch", content=self.part_body(encoded, part, head),
                                           headers=JSON)
            return self.batch_results(body, len(part))

        tasks = [asyncio.ensure_future(send(part)) for part in ranges]
        try:
            return [result for part in await asyncio.gather(*tasks) for result in part]
        finally:
            for task in tasks:  # after a failure, the parts not yet sent are not sent
                task.cancel()

    async def run_code(self, **request: Any) -> dict[str, Any]:
        return self.mapping(await self._request("POST", "/run_code", json=request), "/run_code")

    async def upload_repo(self, archive: bytes) -> str:
        """POST /repos (see Client.upload_repo): the snapshot's id."""
        return self.repo_id(await self._request("POST", "/repos", (200, 201), content=archive, headers=GZIP))

    async def info(self) -> dict[str, Any]:
        return self.mapping(await self._request("GET", "/v1/info"), "/v1/info")

    async def rollouts(self, **params: Any) -> dict[str, Any]:
        return self.mapping(await self._request("GET", "/rollouts", params=params), "/rollouts")

    async def replay(self, rollout_id: str) -> dict[str, Any]:
        return self.mapping(await self._request("POST", f"/rollouts/{rollout_id}/replay"), "replay")

    async def record_run(self, name: str, summary: dict[str, Any]) -> int:
        body = self.mapping(await self._request("POST", "/runs", json={"name": name, "summary": summary}), "/runs")
        if not isinstance(body.get("id"), int):
            raise BadResponse(f"/runs: no run id in {str(body)[:200]}")
        return body["id"]

    async def export(self, **params: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            async with self._http.stream("GET", "/rollouts/export", params=params) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise HTTPStatusError(response.status_code, response.text)
                async for line in response.aiter_lines():
                    if line:
                        yield self.export_line(line)
        except httpx.HTTPError as e:
            raise TransportError(f"export: {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

