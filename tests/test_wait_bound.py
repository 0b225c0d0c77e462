"""Every client gets an answer: a flood of calls each answered with its result or refused at once with Retry-After
when the wait it would face exceeds REWARDBOX_MAX_WAIT_S (service/wait_line.py), never left without an answer;
/healthz answers meanwhile. The same for agent sessions: commands and new sessions while the session pool is
busy (service/sessions.py). Real service, real sandboxes, both backends. Times are generous bounds on "refused at
once" (seconds, against the 80 s a refused call used to wait), not speed targets: those are in bench/overload.py."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from rewardbox.archive import repo_archive

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


SESSION_CMD = "sleep 3; touch ran-{i}"  # 3 s each once learned: 2 run, 3 wait (4.5 s over 2 sandboxes > 4 s)


def test_a_flood_of_session_commands_is_run_or_refused_at_once_and_so_is_a_new_session(waiting_server):
    async def main() -> tuple[list[tuple[httpx.Response, float]], httpx.Response, list[str]]:
        async with httpx.AsyncClient(base_url=waiting_server, timeout=120,
                                     limits=httpx.Limits(max_connections=40)) as client:
            r = await client.post("/repos", content=repo_archive({"README": b"x\n"}),
                                  headers={"content-type": "application/gzip"})
            repo = {"repo": {"id": r.json()["id"]}}
            sids = [(await client.post("/sessions", json=repo)).json()["session_id"] for _ in range(12)]
            warm = await client.post(f"/sessions/{sids[0]}/exec", json={"command": "sleep 3", "timeout_s": 6})
            assert warm.json()["status"] == "ok", warm.text  # the hold of a command is learned: about 3 s

            async def one(i: int) -> tuple[httpx.Response, float]:
                t0 = time.monotonic()
                r = await client.post(f"/sessions/{sids[i]}/exec",
                                      json={"command": SESSION_CMD.format(i=i), "timeout_s": 6})
                return r, time.monotonic() - t0

            calls = [asyncio.ensure_future(one(i)) for i in range(12)]
            first = next(asyncio.as_completed(calls))
            assert (await first)[0].status_code == 429  # refused ones come back first, while 2 run and 3 wait
            new = await client.post("/sessions", json=repo)
            answers = await asyncio.gather(*calls)
            files = [(await client.get(f"/sessions/{sid}/files", params={"path": f"ran-{i}"})).status_code
                     for i, sid in enumerate(sids)]
            return answers, new, [str(f) for f in files]

    answers, new, files = asyncio.run(main())
    ran = [i for i, (r, _) in enumerate(answers) if r.status_code == 200]
    refused = [(i, r, took) for i, (r, took) in enumerate(answers) if r.status_code != 200]
    assert ran and refused
    assert all(answers[i][0].json()["status"] == "ok" and files[i] == "200" for i in ran)
    assert all(r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 and "queued ahead" in r.text
               and took < FAST_S for _, r, took in refused)
    assert all(files[i] == "404" for i, _, _ in refused)  # nothing of a refused command ran
    assert new.status_code == 429 and "queued ahead" in new.text and int(new.headers["Retry-After"]) >= 1
