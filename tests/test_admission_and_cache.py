"""Embedded mode (no REDIS_URL): result cache, admission control and request deadlines, over real HTTP."""

from __future__ import annotations

import time

import httpx
import pytest

from .conftest import start_server, stop_server
from .test_distributed import check_results, item


@pytest.fixture(scope="module")
def small_server():
    """Pool of 2 sandboxes (4 items at once), at most 8 items queued."""
    proc, url = start_server({"REWARDBOX_MAX_QUEUED": "8"})
    try:
        yield url
    finally:
        stop_server(proc)


def test_an_identical_item_is_answered_from_the_cache_marked_and_counted(small_server):
    first = httpx.post(small_server + "/reward", json=item(1), timeout=60).json()
    again = httpx.post(small_server + "/reward", json={**item(1), "id": "other"}, timeout=60).json()
    assert "cache_hit" not in first["details"]
    assert again["details"]["cache_hit"] is True and again["details"]["cached_from"] == first["rollout_id"]
    assert again["id"] == "other" and again["rollout_id"] != first["rollout_id"]
    assert (again["status"], again["reward"]) == (first["status"], first["reward"])
    metrics = httpx.get(small_server + "/metrics").text
    assert 'rewardbox_result_cache_total{outcome="hit"}' in metrics


def test_identical_items_in_one_batch_run_once(small_server):
    items = [{**item(7), "id": f"copy-{i}"} for i in range(6)]
    results = httpx.post(small_server + "/reward/batch", json={"items": items}, timeout=60).json()["results"]
    assert [r["id"] for r in results] == [it["id"] for it in items]
    assert sum(1 for r in results if not r["details"].get("cache_hit")) == 1
    assert all(r["status"] == "passed" for r in results)


def test_more_than_the_queue_bound_is_refused_at_once_with_retry_after(small_server):
    started = time.monotonic()
    res = httpx.post(small_server + "/reward/batch", json={"items": [item(100 + i) for i in range(13)]}, timeout=60)
    assert res.status_code == 429 and int(res.headers["Retry-After"]) >= 1
    assert time.monotonic() - started < 2.0
    ok = httpx.post(small_server + "/reward/batch", json={"items": [item(200 + i) for i in range(8)]}, timeout=60)
    check_results([item(200 + i) for i in range(8)], ok.json()["results"], set())


def test_items_not_started_by_the_deadline_come_back_infra_error(small_server):
    items = [item(300 + i, sleep_s=1.0) for i in range(8)]  # 4 start at once, 4 wait longer than the deadline
    results = httpx.post(small_server + "/reward/batch", json={"items": items, "deadline_s": 0.5},
                         timeout=60).json()["results"]
    late = [r for r in results if r["status"] == "infra_error"]
    assert len(late) == 4 and all(r["reward"] is None and "deadline" in r["message"] for r in late)
    assert sum(r["status"] == "passed" for r in results) == 4
