"""What the dashboard draws from a rollout store's newest rollouts (Store.summary in service/store.py): counts per
minute, the reward histogram, component means, statuses, the slowest and the latest failed rollouts. The SQLite
store computes it in SQL; the Redis store from the records themselves (summary_of_records), with the same result."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .models import COMPONENTS


@dataclass(frozen=True)
class Minute:
    t: int  # epoch seconds at the start of the minute
    count: int
    tests_ms: float | None  # mean time of the tests stage
    reward: float | None  # mean reward


@dataclass(frozen=True)
class RewardBin:
    bin: float  # reward rounded to one decimal
    count: int


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int


@dataclass(frozen=True)
class SlowRollout:
    id: str
    status: str
    reward: float | None
    tests_ms: float
    client_id: str | None


@dataclass(frozen=True)
class FailedRollout:
    id: str
    status: str
    message: str  # why, in one line (reason())
    client_id: str | None


@dataclass(frozen=True)
class Summary:
    throughput: list[Minute]  # oldest minute first
    reward_histogram: list[RewardBin]  # lowest bin first; rollouts without a reward are not counted
    components: dict[str, float | None]  # mean of each reward component (None: no rollout has it)
    statuses: list[StatusCount]  # most frequent first
    slowest: list[SlowRollout]  # the 10 slowest tests stages, slowest first
    recent_failures: list[FailedRollout]  # the 10 newest rollouts that did not pass, newest first

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SLOWEST = 10
FAILURES = 10


def reason(result: dict[str, Any]) -> str:
    """Why a rollout failed, in one line: its message, else its first failing test."""
    if result.get("message"):
        return result["message"]
    failing = next((t for t in result.get("tests") or [] if not t.get("passed")), None)
    return f"{failing['name']}: {failing['message']}" if failing else ""


def tests_ms(result: dict[str, Any]) -> float | None:
    return ((result.get("details") or {}).get("timings") or {}).get("tests_ms")


def _mean(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summary_of_records(records: list[dict[str, Any]]) -> Summary:
    """The summary of rollout records (newest first, as the stores list them), as the SQLite store computes it."""
    minutes: dict[int, list[dict[str, Any]]] = {}
    bins: dict[float, int] = {}
    statuses: dict[str, int] = {}
    for r in records:
        minutes.setdefault(int(r["created_at"] // 60) * 60, []).append(r)
        if r["reward"] is not None:
            bins[round(r["reward"], 1)] = bins.get(round(r["reward"], 1), 0) + 1
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    timed = [r for r in records if tests_ms(r["result"]) is not None]
    slowest = sorted(timed, key=lambda r: tests_ms(r["result"]) or 0.0, reverse=True)[:SLOWEST]
    failed = [r for r in records if r["status"] != "passed"][:FAILURES]
    return Summary(
        throughput=[Minute(m, len(rs), _mean([tests_ms(r["result"]) for r in rs]), _mean([r["reward"] for r in rs]))
                    for m, rs in sorted(minutes.items())],
        reward_histogram=[RewardBin(b, n) for b, n in sorted(bins.items())],
        components={c: _mean([(r["result"].get("components") or {}).get(c) for r in records]) for c in COMPONENTS},
        statuses=[StatusCount(s, n) for s, n in sorted(statuses.items(), key=lambda x: -x[1])],
        slowest=[SlowRollout(r["id"], r["status"], r["reward"], tests_ms(r["result"]) or 0.0, r["client_id"])
                 for r in slowest],
        recent_failures=[FailedRollout(r["id"], r["status"], reason(r["result"]) or "", r["client_id"])
                         for r in failed],
    )
