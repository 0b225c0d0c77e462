"""A batch cut to the service's limits, so that no documented path ever meets them.

The service refuses a `/reward/batch` holding more than `max_batch` items (422), more test cases than it queues at
once (`max_queued`, 422 "send it in smaller requests"), or a body over `max_body_bytes` (413); all three are in
`GET /v1/info` `limits`. A GRPO step of 512 prompts x 8 samples x 20 cases is 80 times the default queue bound, so
the clients cut a batch into consecutive parts within the limits and send them with `IN_FLIGHT` in flight at
once; the results are put back together in the order of the items.

A part is at most half the queue bound in cases (and half the body limit in bytes), so that the part in flight and
the next one fit in the queue together, and the service starts each part as soon as the one before it has sandboxes
free. Counting is the service's own (`item_work`, which service.validation uses too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

IN_FLIGHT = 2  # parts of one batch sent at once: one running, the next queued behind it


def item_work(item: Any) -> int:
    """What the service's admission counts for an item: its test cases (each is at least one program run), at
    least 1. A dict (raw JSON) or any object with the same attributes (the service's validated model)."""
    tests = item.get("tests") if isinstance(item, dict) else getattr(item, "tests", None)
    cases = tests.get("cases") if isinstance(tests, dict) else getattr(tests, "cases", None)
    return max(1, len(cases)) if isinstance(cases, list) else 1


@dataclass(frozen=True)
class BatchLimits:
    """What one request may hold (`GET /v1/info` `limits`)."""

    max_batch: int
    max_queued: int
    max_body_bytes: int | None = None

    @classmethod
    def from_info(cls, info: Any) -> BatchLimits | None:
        """The limits of a `/v1/info` answer; None when it does not state them (an older service)."""
        limits = info.get("limits") if isinstance(info, dict) else None
        if not isinstance(limits, dict):
            return None
        batch, queued, body = limits.get("max_batch"), limits.get("max_queued"), limits.get("max_body_bytes")
        if not (isinstance(batch, int) and isinstance(queued, int) and batch > 0 and queued > 0):
            return None
        return cls(batch, queued, body if isinstance(body, int) and body > 0 else None)


def parts(works: Sequence[int], limits: BatchLimits, sizes: Sequence[int] | None = None) -> list[range]:
    """Consecutive index ranges covering every item, each within the limits: at most `max_batch` items, half of
    `max_queued` cases and half of `max_body_bytes` (sizes: each item's encoded length). An item over a bound on
    its own is a part of its own (the service answers for it)."""
    cases_cap = max(1, limits.max_queued // IN_FLIGHT)
    bytes_cap = limits.max_body_bytes // IN_FLIGHT if limits.max_body_bytes else None
    out: list[range] = []
    start, cases, size = 0, 0, 0
    for i, work in enumerate(works):
        item_size = sizes[i] + 1 if sizes is not None else 0  # +1: the comma between items
        full = (i - start >= limits.max_batch or cases + work > cases_cap
                or (bytes_cap is not None and size + item_size > bytes_cap))
        if full and i > start:
            out.append(range(start, i))
            start, cases, size = i, 0, 0
        cases += work
        size += item_size
    if start < len(works):
        out.append(range(start, len(works)))
    return out
