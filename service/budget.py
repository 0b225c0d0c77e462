"""One budget of sandbox time for all of an item's test runs (REWARDBOX_MAX_ITEM_S), however many cases it has.

A judge job (and a cases job: every io case of a program) already stops at its `total_s`; Rust's tests run as one
job each, so without a shared budget 1,000 cases of 30 s would hold the pool for hours. `ItemBudget` stands
between the graders and the pool for one item: a run may use at most what the item has left (its wall and CPU
limits are cut to that), the time a run really took is charged, and a run that finds nothing left does not start:
its case fails as `timeout`, the program's own doing, like any time limit. Runs in flight hold their share until
they end, so an item never overspends; a run waits while the rest of the budget is held by runs still in flight.

Only test runs are charged: compiles, lints and efficiency measurements have limits of their own.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Protocol

from sandboxes import Job, Limits, Result, Status

CHARGED_OPS = ("run", "judge", "cases")
WHOLE_JOB_OPS = ("judge", "cases")  # bounded by total_s (several processes or cases), not wall_s


class JobRunner(Protocol):
    size: int

    async def run(self, job: Job) -> Result: ...


class ItemBudget:
    def __init__(self, runner: JobRunner, seconds: float) -> None:
        self.runner, self.seconds = runner, seconds
        self.size = runner.size
        self.left = seconds
        self._held = 0.0
        self._changed = asyncio.Condition()

    async def run(self, job: Job) -> Result:
        if job.op not in CHARGED_OPS:
            return await self.runner.run(job)
        async with self._changed:
            await self._changed.wait_for(lambda: self.left - self._held > 0 or self._held == 0)
            share = min(_limit(job.limits, job.op), self.left - self._held)
            if share <= 0:
                return Result(status=Status.TIMEOUT, error=f"the item's {self.seconds:g} s of sandbox time "
                              "(REWARDBOX_MAX_ITEM_S, all its test runs together) ran out before this run")
            self._held += share
        result: Result | None = None
        try:
            result = await self.runner.run(replace(job, limits=_cut(job.limits, job.op, share)))
            return result
        finally:
            async with self._changed:
                self._held -= share
                if result is not None and result.status != Status.SANDBOX_ERROR:
                    self.left -= min(share, max(result.wall_ms / 1000.0, 0.0))
                self._changed.notify_all()


def _limit(limits: Limits, op: str) -> float:
    return limits.total_s if op in WHOLE_JOB_OPS else limits.wall_s


def _cut(limits: Limits, op: str, share: float) -> Limits:
    if op in WHOLE_JOB_OPS:
        return replace(limits, total_s=min(limits.total_s, share)) if share < limits.total_s else limits
    if share >= limits.wall_s:
        return limits
    return replace(limits, wall_s=share, cpu_s=min(limits.cpu_s, max(share, 0.01)))
