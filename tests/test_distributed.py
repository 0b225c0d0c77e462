"""Distributed mode against a real redis-server, real worker and API processes, real sandboxes (bubblewrap)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from .distributed import (
    NetNamespace,
    RedisServer,
    new_prefix,
    service_env,
    start_api,
    start_cluster,
    start_worker,
    stop,
    wait_for_workers,
    wait_until,
)

GROUP = "workers"


def item(i: int, right: bool = True, sleep_s: float = 0.0) -> dict:
    """A cheap item with a known verdict: f() returns i; the test expects i (passed) or i + 1 (failed)."""
    pause = f"    import time\n    time.sleep({sleep_s})\n" if sleep_s else ""
    return {"id": f"item-{i}", "code": f"def f():\n{pause}    return {i}\n", "profile": "binary",
            "tests": {"kind": "function", "entry_point": "f",
                      "cases": [{"args": [], "expected": i if right else i + 1}]}}


def check_results(items: list[dict], results: list[dict], wrong: set[int]) -> None:
    assert [r["id"] for r in results] == [it["id"] for it in items]
    for i, r in enumerate(results):
        expected = ("failed", 0.0) if i in wrong else ("passed", 1.0)
        assert (r["status"], r["reward"]) == expected, r


@pytest.fixture
def redis_server():
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def procs():
    """Processes a test starts; all stopped at the end, whatever happened."""
    started: list = []
    yield started
    for p in started:
        stop(p, signal.SIGKILL, 10)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def consumer_of(r, prefix: str, pid: int) -> str:
    beats = [json.loads(b) for b in r.hgetall(f"{prefix}:workers").values()]
    return next(b["consumer"] for b in beats if b["consumer"].split(":")[1] == str(pid))


def stored_client_ids(r, prefix: str, computed_only: bool = True) -> list[str]:
    ids = []
    for rid in r.zrange(f"{prefix}:rollouts", 0, -1):
        record = json.loads(r.hget(f"{prefix}:rollout:{rid}", "record"))
        if not computed_only or not record["result"]["details"].get("cache_hit"):
            ids.append(record["client_id"])
    return ids


def test_a_worker_killed_mid_batch_loses_nothing_and_duplicates_nothing(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 2, REWARDBOX_MAX_BATCH="1000")
    victim = procs[0]
    victim_name = consumer_of(r, prefix, victim.pid)
    wrong = set(range(0, 500, 7))
    items = [item(i, right=i not in wrong, sleep_s=0.005) for i in range(500)]
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(httpx.post, url + "/reward/batch", json={"items": items}, timeout=300)
        wait_until(lambda: r.zcard(f"{prefix}:rollouts") >= 100, 120, "100 items done")
        victim.kill()
        victim.wait(10)
        held = r.xpending_range(f"{prefix}:jobs", GROUP, "-", "+", 100, consumername=victim_name)
        response = batch.result()
    assert held, "the killed worker held no job: nothing was redelivered"
    assert response.status_code == 200
    results = response.json()["results"]
    check_results(items, results, wrong)
    assert len({res["rollout_id"] for res in results}) == 500
    stored = stored_client_ids(r, prefix)
    assert sorted(stored) == sorted(it["id"] for it in items)  # each item stored once: none lost, none twice
    held_ids = {json.loads(r.hget(f"{prefix}:rollout:{res['rollout_id']}", "record"))["client_id"]
                for res in results}
    assert len(held_ids) == 500


def test_a_worker_stopped_by_sigterm_finishes_or_hands_back_its_jobs(redis_server, procs, tmp_path):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 2, first_worker_log=tmp_path / "stopped.log",
                                             REWARDBOX_WORKER_GRACE_S="0.3")
    items = [item(i, sleep_s=0.5) for i in range(12)]  # longer than the grace period: some are handed back
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(httpx.post, url + "/reward/batch", json={"items": items}, timeout=300)
        wait_until(lambda: r.zcard(f"{prefix}:rollouts") >= 2, 60, "the first items done")
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(30) == 0
        response = batch.result()
    assert "handed back job" in (tmp_path / "stopped.log").read_text()
    check_results(items, response.json()["results"], set())
    assert sorted(stored_client_ids(r, prefix)) == sorted(it["id"] for it in items)


def test_an_api_restart_loses_no_accepted_work(redis_server, procs):
    prefix = new_prefix()
    env = service_env(redis_server.url, prefix)
    procs += [start_worker(env)]
    r = redis_server.client()
    wait_for_workers(r, prefix, 1)
    first, url = start_api(env)
    items = [item(i, sleep_s=0.02) for i in range(120)]
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_post_quietly, url + "/reward/batch", {"items": items})
        wait_until(lambda: r.zcard(f"{prefix}:rollouts") >= 10, 60, "the first items done")
        first.kill()
        first.wait(10)
    second, url = start_api(env)
    procs.append(second)
    response = httpx.post(url + "/reward/batch", json={"items": items}, timeout=300)  # the client asks again
    check_results(items, response.json()["results"], set())
    assert sorted(stored_client_ids(r, prefix)) == sorted(it["id"] for it in items)  # every item scored once
    assert any(res["details"].get("cache_hit") for res in response.json()["results"])


def _post_quietly(url: str, body: dict) -> None:
    try:
        httpx.post(url, json=body, timeout=300)
    except httpx.HTTPError:
        pass  # its server was killed


def test_identical_items_in_flight_run_once_across_requests(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1)
    x, y = item(1, sleep_s=0.3), item(2, sleep_s=0.3)
    first, second = [x, {**x, "id": "x-again"}, y], [{**y, "id": "y-again"}, {**x, "id": "x-third"}]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda b: httpx.post(url + "/reward/batch", json={"items": b}, timeout=60),
                                [first, second]))
    results = [res for a in answers for res in a.json()["results"]]
    assert [res["id"] for res in results] == ["item-1", "x-again", "item-2", "y-again", "x-third"]
    assert all(res["status"] == "passed" for res in results)
    assert len(stored_client_ids(r, prefix)) == 2  # x and y ran once each; the rest are marked hits
    assert len(stored_client_ids(r, prefix, computed_only=False)) == 5


@contextmanager
def batch_in_flight_when_redis_stops(redis_server, r, prefix: str, url: str) -> Iterator[Future]:
    """Posts a batch of 10 slow items to the API at `url` and stops Redis once the first is done; yields the
    batch's pending response."""
    items = [item(i, sleep_s=0.3) for i in range(10)]
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(httpx.post, url + "/reward/batch", json={"items": items}, timeout=120)
        wait_until(lambda: r.zcard(f"{prefix}:rollouts") >= 1, 60, "the first item done")
        redis_server.stop()
        yield batch


def test_redis_restart_gives_503_and_infra_error_then_recovers(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1)
    with batch_in_flight_when_redis_stops(redis_server, r, prefix, url) as batch:
        started = time.monotonic()
        down = httpx.post(url + "/reward", json=item(1000), timeout=30)
        assert down.status_code == 503 and down.headers["Retry-After"]
        assert time.monotonic() - started < 10
        redis_server.start()  # empty: no persistence, the queue is gone
        results = batch.result().json()["results"]
    assert {res["status"] for res in results} <= {"passed", "infra_error"}
    assert any(res["status"] == "infra_error" for res in results)
    assert all(res["reward"] is None for res in results if res["status"] == "infra_error")

    def serves() -> bool:
        res = httpx.post(url + "/reward", json=item(2000), timeout=60)
        return res.status_code == 200 and res.json()["status"] == "passed"

    wait_until(serves, 60, "the API to recover by itself", 0.5)


def test_requests_waiting_while_redis_stays_down_answer_infra_error(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1)
    with batch_in_flight_when_redis_stops(redis_server, r, prefix, url) as batch:
        started = time.monotonic()
        results = batch.result().json()["results"]  # Redis is still down: it cannot come from there
    assert time.monotonic() - started < 30
    assert all(res["status"] == "infra_error" and res["reward"] is None for res in results if res["status"] != "passed")
    assert any(res["status"] == "infra_error" for res in results)


def test_a_redis_restart_with_persistence_loses_no_accepted_item(procs):
    server = RedisServer(persistent=True)
    server.start()
    try:
        prefix = new_prefix()
        env = service_env(server.url, prefix)
        procs.append(start_worker(env))
        r = server.client()
        wait_for_workers(r, prefix, 1)
        api, url = start_api(env)
        procs.append(api)
        items = [item(i, sleep_s=0.2) for i in range(10)]
        with ThreadPoolExecutor(1) as pool:
            batch = pool.submit(httpx.post, url + "/reward/batch", json={"items": items}, timeout=120)
            wait_until(lambda: r.zcard(f"{prefix}:rollouts") >= 1, 60, "the first item done")
            server.stop()
            server.start()  # replays its append-only file: queue, pending entries, waiters
            results = batch.result().json()["results"]
        check_results(items, results, set())
        assert sorted(stored_client_ids(r, prefix)) == sorted(it["id"] for it in items)
    finally:
        for p in procs:
            stop(p, signal.SIGKILL, 10)
        server.stop()


def test_overload_is_refused_fast_and_what_is_accepted_completes(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1, REWARDBOX_MAX_QUEUED="20",
                                             REWARDBOX_WORKER_CONCURRENCY="2")
    # Capacity: 20 queued + 2 running; offered: 22 requests of 10 items each (10x).
    batches = [[item(100 * b + i, sleep_s=0.05) for i in range(10)] for b in range(22)]
    depth: list[int] = []

    def post(batch: list[dict]) -> tuple[int, float, httpx.Response]:
        started = time.monotonic()
        res = httpx.post(url + "/reward/batch", json={"items": batch}, timeout=300)
        depth.append(r.xlen(f"{prefix}:jobs"))
        return res.status_code, time.monotonic() - started, res

    rss_before = rss_kib(api.pid)
    with ThreadPoolExecutor(22) as pool:
        answers = list(pool.map(post, batches))
    assert rss_kib(api.pid) - rss_before < 100 * 1024  # the refused work left nothing behind in the API
    refused = [(s, t, res) for s, t, res in answers if s == 429]
    accepted = [(b, res) for b, (s, _, res) in zip(batches, answers, strict=True) if s == 200]
    assert refused and accepted
    assert all(res.headers.get("Retry-After") for _, _, res in refused)
    assert max(t for _, t, _ in refused) < 2.0  # refused at once, not after queueing
    for batch, res in accepted:
        check_results(batch, res.json()["results"], set())
    assert max(depth) <= 20 + 2  # the stream never held more than the bound (+ what the worker had taken)
    metrics = httpx.get(url + "/metrics").text
    assert 'rewardbox_rejected_items_total{reason="overloaded"}' in metrics


def test_worker_health_check_sees_a_live_worker_of_this_host_only(redis_server, procs):
    import subprocess
    import sys

    prefix = new_prefix()
    env = service_env(redis_server.url, prefix)
    health = [sys.executable, "-m", "service.cli", "worker", "--health"]
    assert subprocess.run(health, env=env).returncode == 1  # no worker yet
    procs.append(start_worker(env))
    wait_for_workers(redis_server.client(), prefix, 1)
    assert subprocess.run(health, env=env).returncode == 0
    stop(procs[0])
    assert subprocess.run(health, env=env).returncode == 1  # it said goodbye


def test_items_not_started_by_the_deadline_are_infra_error(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1, REWARDBOX_WORKER_CONCURRENCY="1")
    items = [item(i, sleep_s=0.6) for i in range(6)]
    results = httpx.post(url + "/reward/batch", json={"items": items, "deadline_s": 1.0}, timeout=60).json()["results"]
    late = [res for res in results if res["status"] == "infra_error"]
    assert late and all(res["reward"] is None and "deadline" in res["message"] for res in late)
    assert all(res["status"] == "passed" for res in results if res not in late)


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_api_and_workers_on_separate_hosts_talk_only_through_redis(procs):
    with NetNamespace(1) as api_host, NetNamespace(2) as worker_host:
        server = RedisServer(bind=("127.0.0.1", api_host.outer_ip, worker_host.outer_ip))
        server.start()
        try:
            prefix = new_prefix()
            procs.append(start_worker(service_env(server.url_on(worker_host.outer_ip), prefix), worker_host.name))
            r = server.client()
            wait_for_workers(r, prefix, 1)
            api, url = start_api(service_env(server.url_on(api_host.outer_ip), prefix), api_host.inner_ip,
                                 api_host.name)
            procs.append(api)
            port = int(url.rsplit(":", 1)[1])
            assert not worker_host.can_connect(api_host.inner_ip, port)  # no path between the two hosts
            assert worker_host.can_connect(worker_host.outer_ip, server.port)
            items = [item(i, right=i % 3 > 0) for i in range(30)]
            first = httpx.post(url + "/reward/batch", json={"items": items}, timeout=120).json()["results"]
            check_results(items, first, set(range(0, 30, 3)))
            again = httpx.post(url + "/reward/batch", json={"items": items}, timeout=120).json()["results"]
            check_results(items, again, set(range(0, 30, 3)))
            assert all(res["details"]["cache_hit"] for res in again)
            assert 'rewardbox_result_cache_total{outcome="hit"} 30.0' in httpx.get(url + "/metrics").text
            listed = httpx.get(url + "/rollouts", params={"failed": "true", "limit": 100}).json()["rollouts"]
            assert len(listed) == 20  # the failed ones, first run and cache hits; shared store in Redis
            replay = httpx.post(f"{url}/rollouts/{first[1]['rollout_id']}/replay", timeout=60).json()
            assert replay["identical"] and not replay["result"]["details"].get("cache_hit")
            run = httpx.post(url + "/run_code", json={"code": "print(6 * 7)"}, timeout=60).json()
            assert run["status"] == "Success" and run["run_result"]["stdout"] == "42\n"
            board = httpx.get(url + "/dashboard/data", timeout=30).json()
            assert {s["status"]: s["count"] for s in board["statuses"]}["failed"] == 20
        finally:
            for p in procs:
                stop(p, signal.SIGKILL, 10)
            server.stop()


def test_the_redis_rollout_store_keeps_the_newest_up_to_its_retention_and_pages_them(redis_server):
    from service.distributed.store import RedisRolloutStore

    store = RedisRolloutStore(redis_server.url, new_prefix(), retention=5)
    for i in range(8):
        result = {"rollout_id": f"r{i}", "id": f"c{i}", "status": "passed" if i % 2 else "failed",
                  "reward": float(i % 2), "profile": "binary", "details": {}}
        store.add({"language": "python", "code": "x"}, result, "img", {"runner": "v"})
    assert store.get("r2") is None and store.get("r3")["client_id"] == "c3"  # the oldest three dropped
    page, cursor = store.list(limit=2)
    assert [r["id"] for r in page] == ["r7", "r6"] and cursor is not None
    rest, end = store.list(limit=10, cursor=cursor)
    assert [r["id"] for r in rest] == ["r5", "r4", "r3"] and end is None
    assert [r["id"] for r in store.list(failed=True)[0]] == ["r6", "r4"]
    assert [r["id"] for r in store.list(status="passed", limit=1)[0]] == ["r7"]
    assert len(list(store.export())) == 5
    r = redis_server.client()
    assert r.zcard(f"{store.prefix}:rollouts:failed") == 2  # the dropped ones left no index entry behind
    store.close()


def _holder(r, prefix: str, dead: set[int]) -> int | None:
    """The pid of the live worker that holds the (only) pending job, if any."""
    for p in r.xpending_range(f"{prefix}:jobs", GROUP, "-", "+", 10):
        pid = int(p["consumer"].split(":")[1])
        if pid not in dead:
            return pid
    return None


def test_a_job_whose_workers_keep_dying_is_answered_infra_error_naming_the_deaths(redis_server, procs, tmp_path):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1)
    slow = {"id": "poison", "code": "import time\ntime.sleep(25)\n", "profile": "binary",
            "limits": {"timeout_s": 30}}
    dead: set[int] = set()
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(httpx.post, url + "/reward", json=slow, timeout=300)
        for death in range(3):  # MAX_DELIVERIES: each worker that takes the job is SIGKILLed while running it
            pid = wait_until(lambda: _holder(r, prefix, dead), 60, "a live worker holding the job")
            victim = next(p for p in procs if p.pid == pid)
            victim.kill()
            victim.wait(10)
            dead.add(pid)
            procs.append(start_worker(env, log_to=tmp_path / f"worker-{death}.log"))
        res = answer.result()
    body = res.json()
    assert res.status_code == 200 and body["status"] == "infra_error" and body["reward"] is None
    assert "died 3 times" in body["message"] and "deadline" not in body["message"]
    assert httpx.post(url + "/reward", json=item(1), timeout=60).json()["status"] == "passed"  # still serving
    assert procs[-1].poll() is None and "Traceback" not in (tmp_path / "worker-2.log").read_text()
    assert int(r.get(f"{prefix}:queued_work") or 0) == 0


def test_requests_arriving_together_are_admitted_by_their_work_across_redis(redis_server, procs):
    prefix, env, r, api, url = start_cluster(redis_server, procs, 1, REWARDBOX_MAX_QUEUED="8")
    stop(procs[0])  # no worker: nothing admitted can start, so exactly the bound is admitted
    batches = [[item(10 * b + i) for i in range(4)] for b in range(12)]
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(httpx.post, url + "/reward/batch", json={"items": b}, timeout=120) for b in batches]
        wait_until(lambda: sum(f.done() for f in futures) == 10, 60, "ten refusals")
        assert int(r.get(f"{prefix}:queued_work")) == 8
        procs.append(start_worker(env))
        answers = [f.result() for f in futures]
    accepted = [(b, a) for b, a in zip(batches, answers, strict=True) if a.status_code == 200]
    assert len(accepted) == 2 and sum(a.status_code == 429 for a in answers) == 10
    for batch, answer in accepted:
        check_results(batch, answer.json()["results"], set())
    assert int(r.get(f"{prefix}:queued_work")) == 0 and r.hlen(f"{prefix}:undelivered") == 0


async def test_a_worker_leaving_hands_back_every_entry_it_holds(redis_server):
    """Entries read but not started (a worker that fails between reading and starting) go back to the stream,
    counted as queued work again, before the worker's consumer is deleted (which would drop them)."""
    from sandboxes import SandboxPool, choose_backend
    from service.config import Settings
    from service.distributed.envelope import ScoreEnvelope
    from service.distributed.queue import Submission
    from service.distributed.worker import Worker

    settings = Settings(redis_url=redis_server.url, redis_prefix=new_prefix(), claim_idle_s=2)
    worker = Worker(SandboxPool(choose_backend("bubblewrap"), size=1), settings)
    await worker.queue.ensure_group()
    now = time.time()
    jobs = [Submission(f"job-{i}", "", ScoreEnvelope(item=item(i), deadline=now + 60, enqueued=now), 1)
            for i in range(3)]
    await worker.queue.enqueue("reply", jobs, False)
    entries = await worker._well_formed(await worker._read(3))
    await worker._took(entries)
    r = redis_server.client()
    assert int(r.get(f"{settings.redis_prefix}:queued_work")) == 0 and len(entries) == 3
    assert await worker._hand_back_pending()
    assert int(r.get(f"{settings.redis_prefix}:queued_work")) == 3
    again = r.xreadgroup(GROUP, "another", {f"{settings.redis_prefix}:jobs": ">"}, count=10)
    assert sorted(f["job"] for _, f in again[0][1]) == ["job-0", "job-1", "job-2"]
    await worker.queue.close()
