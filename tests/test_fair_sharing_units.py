"""Pure logic of sharing: the order FairSlots hands out slots, an item's time budget, admission's arithmetic.
No sandbox: the runner below stands for a pool and records what it was asked to run."""

from __future__ import annotations

import asyncio

import pytest

from sandboxes import Job, Limits, LintJob, Result, RunJob, Status
from service.admission import Admission
from service.budget import ItemBudget
from service.errors import Overloaded
from service.fair import FairSlots


async def _order_of_grants(slots: FairSlots, paths: list[tuple]) -> list[tuple]:
    served: list[tuple] = []
    await slots.acquire(("holder",))  # every slot taken: the others queue in arrival order

    async def one(path: tuple) -> None:
        await slots.acquire(path)
        served.append(path)
        await asyncio.sleep(0)
        slots.release()

    tasks = [asyncio.create_task(one(p)) for p in paths]
    await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*tasks)
    return served


async def test_slots_go_round_robin_by_kind_then_request_then_item():
    big = [("items", "batch", f"item{i}") for i in range(4) for _ in range(2)]  # 4 items x 2 jobs, queued first
    late = [("items", "one-liner", "x"), ("runs", "run_code", 0)]
    served = await _order_of_grants(FairSlots(1), big + late)
    # the kind "runs" and the late request are served right after one job of the batch, not after all eight
    assert served[:3] == [big[0], ("runs", "run_code", 0), ("items", "one-liner", "x")]
    # within the batch, its items take turns; each item's jobs keep their order
    batch = [p for p in served if p[1] == "batch"]
    assert [p[2] for p in batch[:4]] == ["item0", "item1", "item2", "item3"]


async def test_a_waiter_that_times_out_or_is_cancelled_loses_nothing():
    slots = FairSlots(1)
    assert await slots.acquire(("a",))
    assert await slots.acquire(("b",), timeout_s=0.01) is False
    waiter = asyncio.create_task(slots.acquire(("c",)))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.release()
    assert slots.free == 1 and slots.waiting == 0
    assert await slots.acquire(("d",), timeout_s=1)


class Recorder:
    """Stands for the pool: each run takes `wall_s` (reported as the runner would) unless its limit is lower."""

    size = 2

    def __init__(self, wall_s: float) -> None:
        self.wall_s, self.jobs = wall_s, []

    async def run(self, job: Job) -> Result:
        self.jobs.append(job)
        limit = job.limits.total_s if job.op == "judge" else job.limits.wall_s
        took = min(self.wall_s, limit)
        await asyncio.sleep(0)
        return Result(status=Status.OK if took == self.wall_s else Status.TIMEOUT, wall_ms=took * 1000)


async def test_an_items_runs_share_one_budget_and_the_rest_do_not_start():
    runner = Recorder(wall_s=1.0)
    budget = ItemBudget(runner, seconds=3.5)
    job = RunJob(program={"code": "x"}, limits=Limits(wall_s=10, cpu_s=10))
    results = await asyncio.gather(*(budget.run(job) for _ in range(10)))
    ran = [r for r in results if r.wall_ms > 0]
    assert sum(r.wall_ms for r in ran) <= 3500 + 1e-6  # never more than the budget, however many cases
    assert sum(r.status == Status.OK for r in results) == 3
    assert all(r.status == Status.TIMEOUT for r in results if r.status != Status.OK)
    assert len(runner.jobs) <= 4 and any("ran out" in (r.error or "") for r in results)


async def test_a_fast_items_cases_all_run_whatever_their_number():
    runner = Recorder(wall_s=0.001)
    budget = ItemBudget(runner, seconds=1.0)
    job = RunJob(program={"code": "x"}, limits=Limits(wall_s=0.5, cpu_s=0.5))
    results = await asyncio.gather(*(budget.run(job) for _ in range(500)))
    assert all(r.status == Status.OK for r in results)  # held shares are given back: no case is refused unjustly


async def test_compiles_and_lints_are_not_charged():
    runner = Recorder(wall_s=5.0)
    budget = ItemBudget(runner, seconds=1.0)
    lint = await budget.run(LintJob(code="x", limits=Limits(wall_s=10)))
    assert lint.status == Status.OK and budget.left == 1.0


def test_admission_counts_work_reserved_before_any_await():
    admission = Admission(bound=10)
    first = admission.reserve(6)
    with pytest.raises(Overloaded):
        admission.reserve(5)  # counted at once: two requests arriving together cannot both pass
    first.resize(2)  # its real work (cache hits and invalid items weigh nothing)
    second = admission.reserve(8)
    first.started(2)
    assert admission.queued == 8
    second.close()
    first.close()
    assert admission.queued == 0
