"""Every client gets an answer: a flood of calls each answered with its result or refused at once with Retry-After
when the wait it would face exceeds REWARDBOX_MAX_WAIT_S (service/wait_line.py), never left without an answer;
/healthz answers meanwhile. Real service, real sandboxes, both backends. Times are generous bounds on "refused at
once" (seconds, against the 80 s a refused call used to wait), not speed targets: those are in bench/overload.py."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from .conftest import BACKENDS, start_server, stop_server

MAX_WAIT_S = 4
CALLS = 30
FAST_S = 15.0  # a refusal comes back within this: at once, however loaded the test machine
SLEEP = "import time\ntime.sleep(1)\nprint('slept')\n"


@pytest.fixture(scope="module", params=BACKENDS)
def waiting_server(request):
    proc, url = start_server({"REWARDBOX_BACKEND": request.param, "REWARDBOX_MAX_WAIT_S": str(MAX_WAIT_S),
                              "REWARDBOX_RESULT_CACHE_SIZE": "0"})
    try:
        yield url
    finally:
        stop_server(proc)


def body(route: str, i: int) -> dict:
    code = SLEEP + f"# {i}\n"  # distinct calls: none is answered from another's result
    if route == "/run_code":
        return {"code": code, "run_timeout": 2}
    return {"code": code, "limits": {"timeout_s": 2}, "profile": "binary",
            "tests": {"kind": "io", "cases": [{"stdout": "slept\n"}]}}


async def flood(url: str, route: str) -> tuple[list[tuple[httpx.Response, float]], list[float]]:
    """CALLS concurrent calls (each answer and how long it took) and /healthz probes meanwhile (their times)."""
    limits = httpx.Limits(max_connections=CALLS + 5)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        async def call(i: int) -> tuple[httpx.Response, float]:
            t0 = time.monotonic()
            return await client.post(route, json=body(route, i)), time.monotonic() - t0

        async def probe(calls: asyncio.Future) -> list[float]:
            times = []
            while not calls.done():
                t0 = time.monotonic()
                assert (await client.get("/healthz", timeout=10)).json() == {"ok": True}
                times.append(time.monotonic() - t0)
                await asyncio.sleep(0.2)
            return times

        calls = asyncio.gather(*(call(i) for i in range(CALLS)))
        health = await probe(calls)
        return await calls, health


@pytest.mark.parametrize(("route", "refusal"), [("/run_code", 504), ("/reward", 429)])
def test_a_flood_is_answered_or_refused_at_once_with_retry_after(waiting_server, route, refusal):
    answers, health = asyncio.run(flood(waiting_server, route))
    ran = [r for r, _ in answers if r.status_code == 200]
    refused = [(r, took) for r, took in answers if r.status_code != 200]
    assert ran and refused  # 30 s of sandbox time on 2 sandboxes: some run, the rest would wait too long
    assert all(r.status_code == refusal and int(r.headers["Retry-After"]) >= 1 for r, _ in refused)
    at_once = [took for r, took in refused if "queued ahead" in r.text]
    assert at_once and max(at_once) < FAST_S
    if route == "/run_code":
        assert all(r.json()["status"] == "Success" and r.json()["run_result"]["stdout"] == "slept\n" for r in ran)
    else:
        assert all(r.json()["status"] == "passed" for r in ran)
    assert health and max(health) < FAST_S  # the service kept answering


def test_after_a_flood_the_service_admits_again(waiting_server):
    asyncio.run(flood(waiting_server, "/run_code"))
    r = httpx.post(waiting_server + "/run_code", json=body("/run_code", 999), timeout=120)
    assert r.status_code == 200 and r.json()["status"] == "Success"
