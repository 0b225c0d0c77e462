"""Admission control: how much work is accepted and not yet started, against one bound (REWARDBOX_MAX_QUEUED).

Work is counted in test cases (service.validation.item_work), not in items, so one item of 1,000 cases weighs what
1,000 one-case items do. A request reserves its work before anything is spent on it (validation, cache look-ups),
in one step without an await, so requests arriving together cannot all pass a check that none of them has yet
counted; it then resizes its reservation to the work it really brings (cache hits and invalid items weigh nothing)
and gives each item's share back when the item starts. A request that does not fit is refused whole, at once.

In distributed mode the bound is checked again, across API processes, by the script that enqueues
(service/distributed/scripts.py); the reservation here only keeps this process from spending time on requests that
cannot fit.
"""

from __future__ import annotations

from service.errors import Overloaded


class Admission:
    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.queued = 0  # reserved by requests of this process and not yet started
        self.elsewhere = 0  # distributed mode: queued in Redis as last seen

    def fits(self, work: int) -> bool:
        return self.queued + self.elsewhere + work <= self.bound

    def reserve(self, work: int) -> Ticket:
        """Raises Overloaded when the work does not fit."""
        ticket = Ticket(self)
        ticket.resize(work)
        return ticket

    def refusal(self, work: int) -> Overloaded:
        return Overloaded(f"{self.queued + self.elsewhere} test cases queued, {work} more asked; the bound is "
                          f"{self.bound} (REWARDBOX_MAX_QUEUED)")


class Ticket:
    """One request's reservation."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.work = 0

    def resize(self, work: int) -> None:
        grow = work - self.work
        if grow > 0 and not self.admission.fits(grow):
            raise self.admission.refusal(grow)
        self.admission.queued += grow
        self.work = work

    def started(self, work: int) -> None:
        """Part of the reserved work has started: it no longer counts as queued."""
        done = min(work, self.work)
        self.work -= done
        self.admission.queued -= done

    def close(self) -> None:
        self.started(self.work)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
