"""Scoring that rides out short faults: what every adapter does before it reports an infrastructure error.

An item answered `infra_error`, or a service that cannot be reached (after the client's own retries of 429/503/504
and connection errors), is scored again, with back-off, until `budget_s` has passed since the first fault. What is
still unscored then comes back as an `infra_error` result with reward None; each adapter decides what that means for
its trainer (TRL: None, a masked row; verl: stop with a clear error). A 4xx other than 429 is the caller's mistake
and raises at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from rewardbox import AsyncClient, Client, RewardboxError

DEFAULT_BUDGET_S = 300.0


class Budget:
    """Back-off delays (0.5 s doubling, at most 10 s) until `budget_s` after the first fault; then None."""

    def __init__(self, budget_s: float, backoff_s: float = 0.5, cap_s: float = 10.0) -> None:
        self.budget_s, self.backoff_s, self.cap_s = budget_s, backoff_s, cap_s
        self.deadline: float | None = None
        self.attempt = 0

    def next_delay(self) -> float | None:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.budget_s
        if now >= self.deadline:
            return None
        delay = min(self.backoff_s * 2**self.attempt, self.cap_s, self.deadline - now)
        self.attempt += 1
        return delay


def unreachable(message: str) -> dict[str, Any]:
    """The result of an item the service never answered: shaped like a service result."""
    return {"status": "infra_error", "reward": None, "components": {}, "message": message}


def _fault(error: Exception) -> str:
    """A message for a fault worth retrying; re-raises the caller's own mistakes (4xx but 429)."""
    status = getattr(error, "status", None)
    if isinstance(status, int) and 400 <= status < 500 and status != 429:
        raise error
    return f"rewardbox unreachable: {error}"


def score(client: Client, items: list[dict[str, Any]], budget_s: float = DEFAULT_BUDGET_S) -> list[dict[str, Any]]:
    results = [unreachable("not scored") for _ in items]
    pending, budget = list(range(len(items))), Budget(budget_s)
    while pending:
        try:
            for i, result in zip(pending, client.reward_batch([items[i] for i in pending]), strict=True):
                results[i] = result
        except (RewardboxError, httpx.HTTPError) as e:
            message = _fault(e)
            for i in pending:
                results[i] = unreachable(message)
        pending = [i for i in pending if results[i]["status"] == "infra_error"]
        delay = budget.next_delay() if pending else None
        if delay is None:
            break
        time.sleep(delay)
    return results


async def score_async(client: AsyncClient, item: dict[str, Any],
                      budget_s: float = DEFAULT_BUDGET_S) -> dict[str, Any]:
    budget = Budget(budget_s)
    while True:
        try:
            result = await client.reward(item)
        except (RewardboxError, httpx.HTTPError) as e:
            result = unreachable(_fault(e))
        if result["status"] != "infra_error":
            return result
        delay = budget.next_delay()
        if delay is None:
            return result
        await asyncio.sleep(delay)
