"""Admission by time: a request is refused at once when the wait it would face for a slot exceeds a bound.

Counting test cases (service/admission.py) bounds memory, not waiting: 200 `/run_code` calls of `time.sleep(2)` are
200 cases, far under the case bound, and 400 s of sandbox time on a pool of 2. So each request is also weighed by
the slot time its work is expected to hold, and the wait a newcomer would face is worked out from what is queued
ahead of it; over the bound (REWARDBOX_MAX_WAIT_S, or the request's own deadline when shorter) it is refused at
once with `Retry-After` (429; 504 on /run_code), instead of waiting for an answer its client has stopped waiting
for.

The wait follows the order slots are handed out in (service/fair.py): by kind of work, then by request in turn.
A newcomer whose own work is expected to hold S slot-seconds waits for each request of its kind already queued
for at most S of that request's time (the turns alternate), so its wait is the sum of min(q, S) over those
requests, over the slots its kind gets: all of them, or half while the other kind also waits. A lone item behind
a batch of 1,000 therefore waits a turn, not the batch; 200 equal calls wait in line. Its own work is not counted:
a request on an idle service is always admitted, however large.

Expected hold: each unit of work (a test case; a /run_code job's compile and run) is weighed by what units of its
kind have held a slot recently (an exponentially weighted mean, learned as work finishes), and never more than its
worst case (its wall limits); until a unit of a kind has finished, the worst case. A program cannot be known
before it runs: when a flood is slower than what came before it, the estimate is too low for the work admitted
before the first of it finishes, and the backstop is the start deadline (for /run_code twice the bound, then 504).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from service.errors import Overloaded

ALPHA = 0.2  # weight of the newest observation in the mean hold per unit
MAX_RETRY_AFTER_S = 60


class HoldEstimate:
    """Slot-seconds a unit of work of one kind holds, learned from work that finished."""

    def __init__(self) -> None:
        self.per_unit: float | None = None  # None: nothing finished yet, the worst case is used

    def seconds(self, work: int, worst_s: float) -> float:
        if self.per_unit is None:
            return worst_s
        return min(worst_s, max(work, 1) * self.per_unit)

    def observe(self, work: int, held_s: float) -> None:
        x = max(held_s, 0.0) / max(work, 1)
        self.per_unit = x if self.per_unit is None else self.per_unit + ALPHA * (x - self.per_unit)


class Place:
    """One request's place in the line: the expected slot time of its work (in units: test cases, jobs) not yet
    started."""

    def __init__(self, line: WaitLine, kind: Hashable, seconds: float, work: int) -> None:
        self.line, self.kind, self.work = line, kind, work
        self.seconds = self.total = seconds

    def resize(self, work: int) -> None:
        """The request brings other work than it was weighed by (cache hits and invalid items weigh nothing)."""
        factor = work / self.work if self.work > 0 else 0.0
        self.seconds, self.total, self.work = self.seconds * factor, self.total * factor, work

    def started(self, work: int) -> None:
        """That much of the request's work has started: it no longer counts as waiting."""
        share = work / self.work if self.work > 0 else 1.0
        self.seconds = max(0.0, self.seconds - share * self.total)

    def leave(self) -> None:
        self.seconds = 0.0
        self.line.places.discard(self)

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()


class WaitLine:
    """The requests waiting for slots, by kind, with their expected slot time; `capacity` slots serve them."""

    def __init__(self, max_wait_s: float, capacity: int) -> None:
        self.max_wait_s = max_wait_s
        self.capacity = capacity  # 0: unknown (no worker seen yet): nobody is refused for the wait
        self.places: set[Place] = set()
        self.holds: dict[Hashable, HoldEstimate] = {}

    def hold(self, kind: Hashable) -> HoldEstimate:
        return self.holds.setdefault(kind, HoldEstimate())

    def wait_s(self, kind: Hashable, seconds: float) -> float:
        """The expected wait, before all of its work has started, of a newcomer of `kind` whose work holds
        `seconds` (see the module docstring)."""
        if self.capacity <= 0:
            return 0.0
        same = sum(min(p.seconds, seconds) for p in self.places if p.kind == kind)
        others = any(p.kind != kind and p.seconds > 0 for p in self.places)
        return same * (2 if others else 1) / self.capacity

    def join(self, kind: Hashable, seconds: float, work: int, deadline_s: float | None = None,
             fifo: bool = False) -> Place:
        """A place for a request whose work (`work` units) is expected to hold `seconds`; raises Overloaded (the
        wait in the message, Retry-After) when the wait it faces exceeds the bound or its own deadline. In one
        step without an await, so requests arriving together each see the ones before them. fifo: slots are
        handed out in arrival order (no turns), so the newcomer waits for all the work queued ahead of it."""
        bound = min(self.max_wait_s, deadline_s) if deadline_s is not None else self.max_wait_s
        wait = self.wait_s(kind, math.inf if fifo else seconds)
        if wait > bound:
            # Come back when the line has moved by the excess, or sooner: after about one unit of work of this
            # kind, by when the hold has been learned afresh (a worst-case guess may be far too long).
            unit = self.hold(kind).per_unit
            retry = min(MAX_RETRY_AFTER_S, math.ceil(wait - bound), math.ceil(unit) if unit is not None else
                        math.ceil(seconds))
            retry = max(1, retry)
            raise Overloaded(f"the work queued ahead would take about {wait:.0f} s to start; the bound is "
                             f"{bound:g} s (REWARDBOX_MAX_WAIT_S or the request's deadline)", retry_after_s=retry)
        place = Place(self, kind, seconds, work)
        self.places.add(place)
        return place
