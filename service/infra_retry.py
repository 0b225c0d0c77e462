"""Hold a request through short faults of ours, for clients that cannot wait well on their own.

OpenRLHF's remote-RM client retries any error five times, one second apart, ignoring Retry-After and the body, then
fails the run; the SandboxFusion SDK's `submit_safe` turns a failed request into "rejected". So the routes they call
score an item that came back `infra_error` again (the pool has replaced the sandbox that failed, so it runs on
another), and wait out a full queue (Overloaded) or an unreachable queue (Unavailable), with back-off, for up to
`Settings.infra_retry_s` (REWARDBOX_INFRA_RETRY_S, default 60 s: well inside OpenRLHF's 180 s request timeout).
Only then do they answer an error. Verdicts on the program are never retried.

Their requests are not split by their clients, so a request holding more test cases than the queue bound
(REWARDBOX_MAX_QUEUED) is cut here into parts, two in flight, as the client package cuts a batch
(rewardbox/batching.py); each part is held through faults on its own budget.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rewardbox.batching import IN_FLIGHT, BatchLimits, parts
from service.executor import Executor, Overloaded, Unavailable
from service.models import ItemResult, RewardItem
from service.validation import item_work

FIRST_DELAY_S, MAX_DELAY_S = 0.25, 5.0


async def score_holding(executor: Executor, items: list[RewardItem | Any]) -> list[ItemResult]:
    """Results for `items`, in order; those still `infra_error` after the budget are returned as they are.
    Overloaded or Unavailable still standing after the budget is raised (the app answers 429 / 503 with
    Retry-After)."""
    limits = BatchLimits(max_batch=max(len(items), 1), max_queued=executor.settings.max_queued)
    ranges = parts([item_work(item) for item in items], limits)
    if len(ranges) <= 1:
        return await _holding(executor, items)
    in_flight = asyncio.Semaphore(IN_FLIGHT)

    async def part(indices: range) -> list[ItemResult]:
        async with in_flight:
            return await _holding(executor, items[indices.start:indices.stop])

    tasks = [asyncio.ensure_future(part(r)) for r in ranges]
    try:
        return [result for done in await asyncio.gather(*tasks) for result in done]
    finally:
        for task in tasks:
            task.cancel()


async def _holding(executor: Executor, items: list[RewardItem | Any]) -> list[ItemResult]:
    deadline = time.monotonic() + executor.settings.infra_retry_s
    results: list[ItemResult | None] = [None] * len(items)
    pending = list(range(len(items)))
    delay = FIRST_DELAY_S
    retrying = False
    while True:
        try:
            # A retry bypasses the result cache: an identical item in flight may be sharing the fault.
            scored = await executor.score_many([items[i] for i in pending], use_cache=not retrying)
        except (Overloaded, Unavailable):
            if time.monotonic() + delay > deadline:
                if any(r is None for r in results):
                    raise
                return results  # type: ignore[return-value]  # every slot holds an infra_error result
        else:
            for i, result in zip(pending, scored, strict=True):
                results[i] = result
            retrying = True
            pending = [i for i, result in zip(pending, scored, strict=True) if result.status == "infra_error"]
            if not pending or time.monotonic() + delay > deadline:
                return results  # type: ignore[return-value]
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)
