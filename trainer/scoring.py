"""Scoring in the background: `BackgroundScorer.submit(items)` returns at once with a future of the batch's results.

The PPO loop (trainer/ppo.py, `overlap=True`) submits the rollouts of step t+1 as soon as they are sampled and only
then waits for those of step t, so the service scores while the trainer generates and updates. The requests go
through `rewardbox.AsyncClient` on an asyncio loop that lives in one daemon thread; the trainer's thread never
blocks on I/O except in `Future.result()`, and that wait is what the loop logs as `reward_s`.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from rewardbox import AsyncClient


class BackgroundScorer:
    """POST /reward/batch calls in flight on a background event loop; usable as a context manager."""

    def __init__(self, url: str, **client_options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rewardbox-scorer", daemon=True)
        self._thread.start()
        # the client's connection pool belongs to the loop that will use it: build it there
        self._client: AsyncClient = asyncio.run_coroutine_threadsafe(self._make(url, client_options),
                                                                     self._loop).result()

    @staticmethod
    async def _make(url: str, options: dict[str, Any]) -> AsyncClient:
        return AsyncClient(url, **options)

    def submit(self, items: list[dict[str, Any]]) -> Future[list[dict[str, Any]]]:
        """Starts scoring `items`; the future holds one result per item, in order, or the `RewardboxError`."""
        return asyncio.run_coroutine_threadsafe(self._client.reward_batch(items), self._loop)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._client.aclose(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> BackgroundScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
