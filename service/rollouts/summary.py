"""What the dashboard draws from a rollout store's newest rollouts that match its filters (Store.summary in
service/rollouts/store.py): rollouts and tests-stage latency percentiles (p50/p90/p99) per time bucket, pass rate and
mean reward by language, profile and test kind, the reward histogram, component means, statuses, the slowest and the
latest failed rollouts, and the newest rollouts as points a page can open. The SQLite store computes it in SQL;
the Redis store from the records themselves (summary_of_records), with the same result.

Percentiles are nearest-rank: the p-th of n sorted values is the one of rank ceil(p * n / 100), an observed value
(no interpolation), which SQL computes exactly with ROW_NUMBER and integer arithmetic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from service.models import COMPONENTS

PERCENTILES = (50, 90, 99)
BUCKETS_S = (60, 300, 900, 3600, 6 * 3600, 86400)  # time buckets a chart may use, finest first
MAX_BUCKETS = 120  # points of a time chart at most: the finest bucket that keeps under it
SLOWEST = 10
FAILURES = 10
POINTS = 500  # newest rollouts sent as points (each opens from the chart)


@dataclass(frozen=True)
class Filters:
    """Which rollouts a summary covers; None: any. `failed`: every status but passed (as GET /rollouts?failed)."""

    language: str | None = None
    profile: str | None = None
    status: str | None = None
    failed: bool = False
    kind: str | None = None  # the test kind (request.tests.kind)
    since: float | None = None  # epoch seconds, inclusive
    until: float | None = None  # epoch seconds, exclusive

    def matches(self, record: dict[str, Any]) -> bool:
        """What the SQLite store's WHERE clause says (RolloutStore._summary_where), for a record."""
        return ((self.language is None or record["language"] == self.language)
                and (self.profile is None or record["profile"] == self.profile)
                and (self.status is None or record["status"] == self.status)
                and (not self.failed or record["status"] != "passed")
                and (self.kind is None or test_kind(record["request"]) == self.kind)
                and (self.since is None or record["created_at"] >= self.since)
                and (self.until is None or record["created_at"] < self.until))


NO_FILTERS = Filters()


@dataclass(frozen=True)
class Latency:
    """Tests-stage time, ms, of the rollouts that have one (n of them); None when n is 0."""

    n: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class Bucket:
    t: int  # epoch seconds at the start of the bucket (Summary.bucket_s long)
    count: int
    passed: int
    reward: float | None  # mean reward
    latency: Latency


@dataclass(frozen=True)
class Group:
    """The rollouts of one language, profile or test kind."""

    key: str | None
    count: int
    passed: int
    pass_rate: float  # passed / count
    reward: float | None  # mean reward of those that have one


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
class Point:
    """One of the newest rollouts, as a chart point the page opens."""

    id: str
    t: float  # created_at
    status: str
    tests_ms: float | None
    reward: float | None


@dataclass(frozen=True)
class Choices:
    """The values the filters can take: those present in the store's newest rollouts, whatever the filters."""

    language: list[str]
    profile: list[str]
    status: list[str]
    kind: list[str]


@dataclass(frozen=True)
class Summary:
    count: int  # rollouts covered (the newest that match the filters, at most the store's window)
    passed: int
    reward: float | None  # mean reward of those that have one
    bucket_s: int
    throughput: list[Bucket]  # oldest first
    latency: Latency  # over all of them
    by_language: list[Group]  # most rollouts first (then by key)
    by_profile: list[Group]
    by_kind: list[Group]
    reward_histogram: list[RewardBin]  # lowest bin first; rollouts without a reward are not counted
    components: dict[str, float | None]  # mean of each reward component (None: no rollout has it)
    statuses: list[StatusCount]  # most frequent first (then by name)
    slowest: list[SlowRollout]  # the 10 slowest tests stages, slowest first
    recent_failures: list[FailedRollout]  # the 10 newest rollouts that did not pass, newest first
    points: list[Point]  # the newest POINTS, newest first
    choices: Choices

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reason(result: dict[str, Any]) -> str:
    """Why a rollout failed, in one line: its message, else its first failing test."""
    if result.get("message"):
        return result["message"]
    failing = next((t for t in result.get("tests") or [] if not t.get("passed")), None)
    return f"{failing['name']}: {failing['message']}" if failing else ""


def tests_ms(result: dict[str, Any]) -> float | None:
    return ((result.get("details") or {}).get("timings") or {}).get("tests_ms")


def test_kind(request: dict[str, Any] | None) -> str | None:
    tests = (request or {}).get("tests")
    return tests.get("kind") if isinstance(tests, dict) else None


def bucket_for(span_s: float) -> int:
    """The finest bucket that draws `span_s` in at most MAX_BUCKETS points (the coarsest when none does)."""
    return next((b for b in BUCKETS_S if span_s / b <= MAX_BUCKETS), BUCKETS_S[-1])


def rank(p: int, n: int) -> int:
    """Nearest rank (1-based) of the p-th percentile of n values: ceil(p * n / 100), in integers."""
    return max(1, -(-p * n // 100))


def latency_of(values: list[float]) -> Latency:
    ordered = sorted(values)
    n = len(ordered)
    p50, p90, p99 = (ordered[rank(p, n) - 1] if n else None for p in PERCENTILES)
    return Latency(n, p50, p90, p99)


def _mean(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _groups(records: list[dict[str, Any]], key: Any) -> list[Group]:
    by: dict[str | None, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(key(r), []).append(r)
    groups = [Group(k, len(rs), sum(r["status"] == "passed" for r in rs),
                    sum(r["status"] == "passed" for r in rs) / len(rs), _mean([r["reward"] for r in rs]))
              for k, rs in by.items()]
    return sorted(groups, key=group_order)


def group_order(g: Group) -> tuple[int, str]:
    return -g.count, g.key or ""


def span_of(filters: Filters, first: float | None, last: float | None) -> float:
    """The time a summary's chart spans: the filter's range where it gives one, else the rollouts' own."""
    start = filters.since if filters.since is not None else first
    end = filters.until if filters.until is not None else last
    return max(0.0, (end or 0.0) - (start or 0.0))


def summary_of_records(window: list[dict[str, Any]], filters: Filters = NO_FILTERS,
                       matching: list[dict[str, Any]] | None = None) -> Summary:
    """The summary, as the SQLite store computes it, of `matching` (the newest records that match the filters,
    newest first, as the stores list them) with the choices of `window` (the newest records, unfiltered);
    `matching` defaults to the window's records that match."""
    records = [r for r in window if filters.matches(r)] if matching is None else matching
    times = [r["created_at"] for r in records]
    bucket_s = bucket_for(span_of(filters, min(times, default=None), max(times, default=None)))
    buckets: dict[int, list[dict[str, Any]]] = {}
    bins: dict[float, int] = {}
    statuses: dict[str, int] = {}
    for r in records:
        buckets.setdefault(int(r["created_at"] // bucket_s) * bucket_s, []).append(r)
        if r["reward"] is not None:
            bins[round(r["reward"], 1)] = bins.get(round(r["reward"], 1), 0) + 1
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    timed = [r for r in records if tests_ms(r["result"]) is not None]
    slowest = sorted(timed, key=lambda r: tests_ms(r["result"]) or 0.0, reverse=True)[:SLOWEST]
    failed = [r for r in records if r["status"] != "passed"][:FAILURES]

    def ms(rs: list[dict[str, Any]]) -> list[float]:
        return [v for v in (tests_ms(r["result"]) for r in rs) if v is not None]

    def present(key: Any) -> list[str]:
        return sorted({k for k in map(key, window) if k is not None})

    return Summary(
        count=len(records),
        passed=sum(r["status"] == "passed" for r in records),
        reward=_mean([r["reward"] for r in records]),
        bucket_s=bucket_s,
        throughput=[Bucket(t, len(rs), sum(r["status"] == "passed" for r in rs), _mean([r["reward"] for r in rs]),
                           latency_of(ms(rs))) for t, rs in sorted(buckets.items())],
        latency=latency_of(ms(records)),
        by_language=_groups(records, lambda r: r["language"]),
        by_profile=_groups(records, lambda r: r["profile"]),
        by_kind=_groups(records, lambda r: test_kind(r["request"])),
        reward_histogram=[RewardBin(b, n) for b, n in sorted(bins.items())],
        components={c: _mean([(r["result"].get("components") or {}).get(c) for r in records]) for c in COMPONENTS},
        statuses=[StatusCount(s, n) for s, n in sorted(statuses.items(), key=lambda x: (-x[1], x[0]))],
        slowest=[SlowRollout(r["id"], r["status"], r["reward"], tests_ms(r["result"]) or 0.0, r["client_id"])
                 for r in slowest],
        recent_failures=[FailedRollout(r["id"], r["status"], reason(r["result"]) or "", r["client_id"])
                         for r in failed],
        points=[Point(r["id"], r["created_at"], r["status"], tests_ms(r["result"]), r["reward"])
                for r in records[:POINTS]],
        choices=Choices(present(lambda r: r["language"]), present(lambda r: r["profile"]),
                        present(lambda r: r["status"]), present(lambda r: test_kind(r["request"]))),
    )
