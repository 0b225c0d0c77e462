"""Embedded mode (no REDIS_URL): admission by work, fair sharing, an item's time budget, request deadlines and the
result cache (also across a crash), over real HTTP against `rewardbox serve` and real sandboxes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from .conftest import start_server, stop_server
from .distributed import wait_until
from .test_distributed import check_results, item

SLEEPER = "import time\ntime.sleep({s})\nprint('slept')\n"


@pytest.fixture(scope="module")
def small_server():
    """Pool of 2 sandboxes, 2 items (or /run_code requests) started at once, at most 8 test cases queued. No
    refusal by expected wait (tests/test_wait_bound.py has its own): these tests queue on purpose."""
    proc, url = start_server({"REWARDBOX_MAX_QUEUED": "8", "REWARDBOX_WORKER_CONCURRENCY": "2",
                              "REWARDBOX_MAX_TIMEOUT_S": "60", "REWARDBOX_MAX_ITEM_S": "3",
                              "REWARDBOX_MAX_WAIT_S": "3600"})
    try:
        yield url
    finally:
        stop_server(proc)


def state(url: str) -> dict:
    snap = httpx.get(url + "/readyz", timeout=10).json()
    queued = next(float(line.split()[-1]) for line in httpx.get(url + "/metrics", timeout=10).text.splitlines()
                  if line.startswith("rewardbox_queued_items "))
    return {**snap, "queued": queued}


def run_code(url: str, code: str, timeout_s: float = 30) -> httpx.Response:
    return httpx.post(url + "/run_code", json={"code": code, "run_timeout": timeout_s}, timeout=120)


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


def test_requests_arriving_together_are_admitted_by_their_work_atomically(small_server):
    """Both item slots held by two sleeping /run_code calls, so nothing that is admitted can start: what is
    admitted is exactly what the bound allows, whatever the order the twelve requests arrive in."""
    with ThreadPoolExecutor(16) as pool:
        sleepers = [pool.submit(run_code, small_server, SLEEPER.format(s=6)) for _ in range(2)]
        wait_until(lambda: state(small_server)["busy"] == 2, 60, "both sandboxes busy with the sleepers")
        batches = [[item(1000 + 10 * b + i) for i in range(4)] for b in range(12)]  # 4 test cases each
        answers = list(pool.map(lambda b: httpx.post(small_server + "/reward/batch", json={"items": b},
                                                     timeout=120), batches))
        assert [s.result().json()["status"] for s in sleepers] == ["Success", "Success"]
    accepted = [(b, a) for b, a in zip(batches, answers, strict=True) if a.status_code == 200]
    refused = [a for a in answers if a.status_code != 200]
    assert len(accepted) == 2  # 2 x 4 cases = the bound of 8; before the fix all twelve got in
    assert {a.status_code for a in refused} == {429} and all(int(a.headers["Retry-After"]) >= 1 for a in refused)
    assert all("bound is 8" in a.json()["detail"] for a in refused)
    for batch, answer in accepted:  # what was admitted completes: nothing was dropped at a deadline
        check_results(batch, answer.json()["results"], set())
    assert state(small_server)["queued"] == 0


def test_work_is_counted_in_test_cases_not_items(small_server):
    many_cases = {**item(50), "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": ""}] * 9}}
    too_big = httpx.post(small_server + "/reward/batch", json={"items": [many_cases, item(49)]}, timeout=60)
    assert too_big.status_code == 422 and too_big.json()["detail"][0]["loc"] == ["body", "items"]
    assert "10 test cases" in too_big.json()["detail"][0]["msg"]
    alone = httpx.post(small_server + "/reward", json=many_cases, timeout=60)
    assert alone.status_code == 422 and "9 test cases" in alone.json()["detail"][0]["msg"]
    with ThreadPoolExecutor(4) as pool:
        sleepers = [pool.submit(run_code, small_server, SLEEPER.format(s=4)) for _ in range(2)]
        wait_until(lambda: state(small_server)["busy"] == 2, 60, "both sandboxes busy")
        eight = {**item(51), "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": ""}] * 8}}
        first = pool.submit(httpx.post, small_server + "/reward/batch", json={"items": [eight]}, timeout=120)
        wait_until(lambda: state(small_server)["queued"] == 8, 30, "the item of 8 cases admitted")
        one_more = httpx.post(small_server + "/reward", json=item(52), timeout=60)
        assert one_more.status_code == 429  # one item, but the queue already holds 8 cases
        assert first.result().status_code == 200
        [s.result() for s in sleepers]


def test_run_code_goes_through_admission_and_shares_fairly_with_reward(small_server):
    with ThreadPoolExecutor(16) as pool:
        flood = [pool.submit(run_code, small_server, SLEEPER.format(s=2)) for _ in range(8)]
        wait_until(lambda: state(small_server)["queued"] == 6, 60, "2 calls running and 6 queued")
        reward = httpx.post(small_server + "/reward", json=item(60), timeout=120)
        still_waiting = sum(not f.done() for f in flood)
        extra = [pool.submit(run_code, small_server, SLEEPER.format(s=2)) for _ in range(10)]
        answers = [f.result() for f in flood + extra]
    assert reward.status_code == 200 and reward.json()["status"] == "passed"
    assert still_waiting >= 3  # it took the next free slot, not the place after the queued /run_code calls
    over = [a for a in answers if a.status_code != 200]
    assert over and {a.status_code for a in over} == {504}  # verl retries 504: overload must not read as a 0
    assert all(a.headers.get("Retry-After") for a in over)
    ran = [a.json() for a in answers if a.status_code == 200]
    assert all(r["status"] == "Success" and r["run_result"]["stdout"] == "slept\n" for r in ran)  # no SandboxError


def test_a_big_batch_does_not_hold_the_sandboxes_while_a_small_request_waits(small_server):
    slow = [item(2000 + i, sleep_s=1.0) for i in range(8)]  # 8 s of sandbox time, 4 s on 2 sandboxes
    with ThreadPoolExecutor(2) as pool:
        batch = pool.submit(httpx.post, small_server + "/reward/batch", json={"items": slow}, timeout=120)
        wait_until(lambda: state(small_server)["busy"] == 2, 60, "the batch running")
        small = httpx.post(small_server + "/reward", json=item(2100), timeout=120)
        batch_was_running = not batch.done()
        check_results(slow, batch.result().json()["results"], set())
    assert small.json()["status"] == "passed" and batch_was_running


def test_one_item_cannot_hold_the_pool_beyond_its_time_budget(small_server):
    """REWARDBOX_MAX_ITEM_S=3 here: 8 cases of 1 s each are cut at 3 s of sandbox time, all cases together."""
    code = "import time\ntime.sleep(1)\nprint(input())\n"
    cases = [{"stdin": f"{i}\n", "stdout": f"{i}\n"} for i in range(8)]
    res = httpx.post(small_server + "/reward", json={"code": code, "tests": {"kind": "io", "cases": cases},
                                                     "limits": {"timeout_s": 5}, "profile": "binary"},
                     timeout=120).json()
    passed = [t for t in res["tests"] if t["passed"]]
    assert len(passed) <= 3 and res["status"] == "timeout" and res["reward"] == 0.0
    assert sum(t["status"] == "timeout" for t in res["tests"]) >= 5
    assert httpx.post(small_server + "/reward", json=item(70), timeout=60).json()["status"] == "passed"


def test_cases_per_item_are_capped(small_server):
    info = httpx.get(small_server + "/v1/info").json()["limits"]
    cases = [{"stdin": "", "stdout": ""}] * (info["max_cases"] + 1)
    r = httpx.post(small_server + "/reward", json={"code": "pass", "tests": {"kind": "io", "cases": cases}},
                   timeout=60)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tests", "cases"]


def test_items_not_started_by_the_deadline_come_back_infra_error(small_server):
    items = [item(300 + i, sleep_s=1.0) for i in range(4)]  # 2 start at once, 2 wait longer than the deadline
    results = httpx.post(small_server + "/reward/batch", json={"items": items, "deadline_s": 0.5},
                         timeout=60).json()["results"]
    late = [r for r in results if r["status"] == "infra_error"]
    assert len(late) == 2 and all(r["reward"] is None and "deadline" in r["message"] for r in late)
    assert sum(r["status"] == "passed" for r in results) == 2


def _computed(db: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT client_id, result FROM rollouts").fetchall()
    return [cid for cid, result in rows if not json.loads(result)["details"].get("cache_hit")]


def test_a_crash_mid_batch_loses_no_finished_work_for_the_client():
    db = os.path.join(tempfile.mkdtemp(prefix="rewardbox-crash-"), "rollouts.sqlite3")
    env = {"REWARDBOX_DB": db}
    items = [item(400 + i, sleep_s=0.2) for i in range(30)]
    proc, url = start_server(env)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_post_quietly, url + "/reward/batch", {"items": items})
        wait_until(lambda: os.path.exists(db) and len(_computed(db)) >= 8, 120, "8 items scored")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finished = set(_computed(db))
    proc, url = start_server(env)
    try:
        results = httpx.post(url + "/reward/batch", json={"items": items}, timeout=300).json()["results"]
    finally:
        stop_server(proc)
    check_results(items, results, set())
    reused = {r["id"] for r in results if r["details"].get("cache_hit")}
    assert finished and finished <= reused  # everything scored before the crash came from the store
    assert sorted(_computed(db)) == sorted(it["id"] for it in items)  # each item scored exactly once


def _post_quietly(url: str, body: dict) -> None:
    try:
        httpx.post(url, json=body, timeout=300)
    except httpx.HTTPError:
        pass  # its server was killed


def until_closed(sock) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_slow_or_silent_clients_are_cut_off():
    import socket

    proc, url = start_server({"REWARDBOX_HEADER_TIMEOUT_S": "1", "REWARDBOX_BODY_TIMEOUT_S": "1"})
    host, port = url.removeprefix("http://").split(":")
    try:
        partial = []
        for _ in range(50):  # slowloris: half a request head each
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            partial.append(s)
        no_body = socket.create_connection((host, int(port)))  # a length declared, no body sent
        no_body.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n")
        over = socket.create_connection((host, int(port)))  # over the limit, no body sent
        over.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(64 << 20).encode() + b"\r\n\r\n")
        for s in [*partial, no_body, over]:
            s.settimeout(30)
        assert over.recv(4096).startswith(b"HTTP/1.1 413")
        assert until_closed(no_body).startswith(b"HTTP/1.1 408")  # and closed: until_closed returned
        for s in partial:
            reply = until_closed(s)
            assert reply == b"" or reply.startswith(b"HTTP/1.1 408")
            s.close()
        assert httpx.get(url + "/healthz", timeout=10).json() == {"ok": True}
    finally:
        stop_server(proc)


def test_a_slow_but_steady_upload_within_the_limits_is_served():
    import socket

    proc, url = start_server({"REWARDBOX_HEADER_TIMEOUT_S": "2", "REWARDBOX_BODY_TIMEOUT_S": "10"})
    host, port = url.removeprefix("http://").split(":")
    try:
        body = json.dumps(item(500)).encode()
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n")
            for i in range(0, len(body), len(body) // 4 + 1):
                s.sendall(body[i:i + len(body) // 4 + 1])
                time.sleep(0.5)
            s.settimeout(60)
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        stop_server(proc)
