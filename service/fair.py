"""Fair sharing of the sandboxes: the next free slot goes, in turn, to each kind of work (scoring items, raw
/run_code jobs), then to the request of that kind served least recently, then to that request's item served least
recently; an item's own jobs keep their order.

Without it, slots go first come, first served: a batch of 1,000 items (or one item of 1,000 test cases) queued
ahead of a one-line `/reward` holds every sandbox until it is done, and so do 200 queued `/run_code` calls. With
it, a request waits for at most one job per sandbox of each other request of its kind, and the two kinds split
the sandboxes between them whenever both are waiting (a flood of one kind cannot stall the other).

`FairSlots` is the policy (round robin at each level of a tree of waiting futures). `FairPool` puts it in front of
a SandboxPool: at most `pool.size` jobs are at the pool at once, so the pool's own FIFO queue stays empty and
never decides. Which kind, request and item a job belongs to comes from context variables that the executors set
(`request_scope`, `item_scope`), so the graders, the linter and the compile cache, which only call
`pool.run(job)`, need not know.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sandboxes import Job, Result, SandboxPool

ITEMS, RUNS = "items", "runs"  # the kinds of work: scoring reward items, raw /run_code jobs
LANE: ContextVar[tuple[Hashable, Hashable]] = ContextVar("rewardbox_lane", default=(ITEMS, "background"))
ITEM: ContextVar[Hashable] = ContextVar("rewardbox_item", default=0)
_ids = itertools.count(1)


@contextmanager
def request_scope(kind: str = ITEMS, request: Hashable | None = None) -> Iterator[Hashable]:
    """Jobs started in this context (and in tasks created from it) count for this request of this kind (a new
    request when not named; distributed mode names it, so that the items of one request share one turn on
    every worker)."""
    request = request if request is not None else next(_ids)
    token = LANE.set((kind, request))
    try:
        yield request
    finally:
        LANE.reset(token)


@contextmanager
def item_scope(item: Hashable) -> Iterator[None]:
    """Jobs started in this context count for this item of the current request."""
    token = ITEM.set(item)
    try:
        yield
    finally:
        ITEM.reset(token)


def current_path() -> tuple[Hashable, ...]:
    return (*LANE.get(), ITEM.get())


class FairSlots:
    """`capacity` slots handed out by round robin at every level of the waiters' paths (e.g. kind, request,
    item): the first child at each level is served, then moved to the end of its level."""

    def __init__(self, capacity: int) -> None:
        self.capacity = self.free = max(1, capacity)
        self._tree: OrderedDict[Hashable, Any] = OrderedDict()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    async def acquire(self, path: tuple[Hashable, ...], timeout_s: float | None = None) -> bool:
        """True with a slot held (give it back with release()); False when none came within timeout_s."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        node = self._tree
        for key in path:
            node = node.setdefault(key, OrderedDict())
        node.setdefault(None, deque()).append(future)  # the waiters of this exact path, in arrival order
        self._waiting += 1
        self._grant()
        try:
            if not future.done():  # granted at once: no timer, no turn of the event loop
                await asyncio.wait_for(future, timeout_s) if timeout_s is not None else await future
            return True
        except TimeoutError:
            return False
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as we were cancelled: hand it on
                self.release()
            raise
        finally:
            if not future.done() or future.cancelled():
                self._waiting -= 1
                future.cancel()  # _grant skips it

    def release(self) -> None:
        self.free += 1
        self._grant()

    def _grant(self) -> None:
        while self.free > 0 and self._tree:
            future = self._pop(self._tree)
            if future is None or future.done():  # a waiter that gave up
                continue
            self.free -= 1
            self._waiting -= 1
            future.set_result(None)

    def _pop(self, node: OrderedDict) -> asyncio.Future[None] | None:
        """The next waiter under node; rotates each level it passes and prunes what it empties."""
        key = next(iter(node))
        child = node[key]
        future = child.popleft() if key is None else self._pop(child)
        if child:
            node.move_to_end(key)
        else:
            del node[key]
        return future


class FairPool:
    """A SandboxPool whose jobs take turns by kind, request and item (see the module docstring)."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.size = pool.size
        self.backend = pool.backend
        self.slots = FairSlots(pool.size)

    async def run(self, job: Job) -> Result:
        await self.slots.acquire(current_path())
        try:
            return await self.pool.run(job)
        finally:
            self.slots.release()

    def snapshot(self) -> dict[str, Any]:
        return {**self.pool.snapshot(), "jobs_waiting": self.slots.waiting}
