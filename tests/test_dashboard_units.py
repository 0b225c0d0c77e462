"""The dashboard's figures (service/rollouts/summary.py): nearest-rank latency percentiles, pass rate and reward by
language, profile and test kind, the filters and the time buckets; the SQLite store's SQL says what the Python of
the Redis store says, filter by filter. No sandbox, no server."""

from __future__ import annotations

from collections import Counter

import pytest

from service.rollouts.store import RolloutStore
from service.rollouts.summary import (
    BUCKETS_S,
    MAX_BUCKETS,
    Filters,
    Group,
    bucket_for,
    latency_of,
    rank,
    summary_of_records,
)

from .summaries import rounded

T0 = 1_800_000_000.0  # the first rollout's time (epoch s); the others follow every 5 minutes
LANGUAGES = ("python", "rust", "cpp")
KINDS = ("assert", "io", "function")
STATUSES = ("passed", "passed", "failed", "timeout", "passed", "infra_error")


def made(i: int) -> tuple[dict, dict]:
    status = STATUSES[i % len(STATUSES)]
    reward = None if status == "infra_error" else (1.0 if status == "passed" else 0.1 * (i % 5))
    request = {"language": LANGUAGES[i % 3], "code": f"x = {i}", "tests": {"kind": KINDS[i % 3 if i % 7 else 0]}}
    result = {"rollout_id": f"r{i:02d}", "id": None, "status": status, "reward": reward,
              "profile": "binary" if i % 4 else "seed", "components": {"pass_rate": reward},
              "details": {"timings": {"tests_ms": float((i * 37) % 101)}} if i % 9 else {},
              "message": "", "tests": [{"name": "t", "passed": status == "passed", "message": "m"}]}
    return request, result


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = RolloutStore(tmp_path_factory.mktemp("dash") / "rollouts.sqlite3")
    for i in range(48):
        store.add(*made(i), "img", {"runner": "1"})
    for i in range(48):  # times of our choosing (the store stamps time.time())
        store.db.execute("UPDATE rollouts SET created_at = ? WHERE id = ?", (T0 + 300 * i, f"r{i:02d}"))
    yield store
    store.close()


def test_percentiles_are_nearest_rank_observed_values():
    values = [float(v) for v in range(100, 0, -1)]
    assert (latency_of(values).p50_ms, latency_of(values).p90_ms, latency_of(values).p99_ms) == (50.0, 90.0, 99.0)
    assert latency_of([7.0]) == latency_of([7.0]) and latency_of([7.0]).p99_ms == 7.0
    assert latency_of([1.0, 2.0, 3.0]).p50_ms == 2.0 and latency_of([1.0, 2.0]).p50_ms == 1.0
    assert latency_of([]).n == 0 and latency_of([]).p50_ms is None
    assert [rank(99, n) for n in (1, 10, 100, 101)] == [1, 10, 99, 100]


def test_the_bucket_is_the_finest_that_keeps_a_chart_under_its_points():
    assert bucket_for(0) == 60 and bucket_for(60 * MAX_BUCKETS) == 60
    assert bucket_for(60 * MAX_BUCKETS + 1) == 300
    assert bucket_for(10 ** 9) == BUCKETS_S[-1]


@pytest.mark.parametrize("filters", [
    Filters(), Filters(language="rust"), Filters(profile="seed"), Filters(status="failed"), Filters(failed=True),
    Filters(kind="io"), Filters(since=T0 + 3600), Filters(until=T0 + 3600), Filters(since=T0 + 600, until=T0 + 1200),
    Filters(language="python", failed=True, kind="assert"), Filters(language="none of ours")])
def test_the_sql_summary_is_the_python_one_for_every_filter(store, filters):
    records = store.list(limit=1000)[0]
    assert rounded(store.summary(filters)) == rounded(summary_of_records(records, filters))


def test_groups_give_pass_rate_and_mean_reward_per_language_profile_and_kind(store):
    summary = store.summary()
    assert summary.count == 48 and sum(g.count for g in summary.by_language) == 48
    python = next(g for g in summary.by_language if g.key == "python")
    # python is every third rollout from 0: statuses cycle over 6, so passed, failed, passed, ... of 16
    assert python == Group("python", 16, 8, 0.5, pytest.approx(python.reward))
    assert {g.key for g in summary.by_kind} == set(KINDS) and {g.key for g in summary.by_profile} == {"binary", "seed"}
    assert all(0 <= g.pass_rate <= 1 for g in summary.by_kind)


def test_filters_select_the_rollouts_and_leave_the_choices_whole(store):
    rust = store.summary(Filters(language="rust"))
    assert [g.key for g in rust.by_language] == ["rust"] and rust.count == 16
    assert rust.choices.language == ["cpp", "python", "rust"]
    assert rust.choices.status == ["failed", "infra_error", "passed", "timeout"]
    failed = store.summary(Filters(failed=True))
    assert failed.count == 24 and all(p.status != "passed" for p in failed.points)
    hour = store.summary(Filters(since=T0, until=T0 + 3600))
    assert hour.count == 12 and hour.bucket_s == 60 and all(T0 <= b.t < T0 + 3600 for b in hour.throughput)


def test_each_bucket_has_its_count_passes_and_latency_percentiles(store):
    summary = store.summary()
    assert summary.bucket_s == 300  # 4 hours of rollouts: 5-minute buckets keep the chart under 120 points
    assert len(summary.throughput) == 48 and all(b.count == 1 for b in summary.throughput)
    timed = [b for b in summary.throughput if b.latency.n]
    assert len(timed) == 48 - 6 and all(b.latency.p50_ms == b.latency.p99_ms for b in timed)  # one rollout each
    assert summary.latency.n == 42 and summary.latency.p50_ms <= summary.latency.p90_ms <= summary.latency.p99_ms
    assert [p.id for p in summary.points][:2] == ["r47", "r46"]  # newest first


def test_a_store_written_before_the_test_kind_column_groups_by_the_requests_kind(tmp_path):
    path = tmp_path / "rollouts.sqlite3"
    old = RolloutStore(path)
    for i in range(12):
        old.add(*made(i), "img", {"runner": "1"})
    old.db.execute("ALTER TABLE rollouts DROP COLUMN test_kind")  # as a store of the earlier schema
    old.close()
    store = RolloutStore(path)  # adds the column; the old rows leave it NULL
    store.add(*made(12), "img", {"runner": "1"})
    kinds = {g.key: g.count for g in store.summary().by_kind}
    expected = Counter(made(i)[0]["tests"]["kind"] for i in range(13))
    assert kinds == expected and store.summary(Filters(kind="io")).count == expected["io"]
    assert "test_kind" not in store.get("r00")  # a rollout reads as before
    store.close()
