"""Sessions under a flood: a command (or a new session) that would wait longer than REWARDBOX_MAX_WAIT_S for the
commands queued ahead on the session pool is refused at once with Retry-After (service/sessions/manager.py, the wait
line of service/wait_line.py), never left hanging; /healthz answers meanwhile. Real service, real sandboxes, both
backends. FAST_S is a generous bound on "at once" (under the SLEEP_S a refused command would otherwise have
waited behind), not a speed target."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from rewardbox.archive import repo_archive

from .conftest import BACKENDS, start_server, stop_server
from .distributed import start_cluster
from .test_distributed import procs, redis_server  # noqa: F401 - the fixtures

MAX_WAIT_S = 5
SLEEP_S = 6  # each command's run: past the bound, under the backstop (twice the bound) for the one queued
CALLS = 6
FAST_S = 4.0


@pytest.fixture(scope="module", params=BACKENDS)
def server(request):
    proc, url = start_server({"REWARDBOX_BACKEND": request.param, "REWARDBOX_SESSION_POOL_SIZE": "1",
                              "REWARDBOX_MAX_WAIT_S": str(MAX_WAIT_S)})
    try:
        yield url
    finally:
        stop_server(proc)


async def new_session(client: httpx.AsyncClient, repo_id: str) -> httpx.Response:
    return await client.post("/sessions", json={"repo": {"id": repo_id}})


async def flood(url: str) -> tuple[list[tuple[httpx.Response, float]], httpx.Response, list[float]]:
    """CALLS long commands at once, each in its own session; a session created while they wait; /healthz
    probes meanwhile (their times)."""
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=CALLS + 5)) as c:
        r = await c.post("/repos", content=repo_archive({"README": b"flood\n"}),
                         headers={"content-type": "application/gzip"})
        assert r.status_code in (200, 201), r.text
        repo_id = r.json()["id"]
        sids = []
        for _ in range(CALLS):
            r = await new_session(c, repo_id)
            assert r.status_code == 201, r.text
            sids.append(r.json()["session_id"])

        async def call(sid: str) -> tuple[httpx.Response, float]:
            t0 = time.monotonic()
            r = await c.post(f"/sessions/{sid}/exec", json={"command": f"sleep {SLEEP_S}", "timeout_s": 10})
            return r, time.monotonic() - t0

        async def probe(calls: asyncio.Future) -> list[float]:
            times = []
            while not calls.done():
                t0 = time.monotonic()
                assert (await c.get("/healthz", timeout=10)).json() == {"ok": True}
                times.append(time.monotonic() - t0)
                await asyncio.sleep(0.2)
            return times

        calls = asyncio.gather(*(call(s) for s in sids))
        await asyncio.sleep(1.0)  # the commands are in line: one runs, one waits for it
        created = await new_session(c, repo_id)
        health = await probe(calls)
        return await calls, created, health


@pytest.fixture(scope="module")
def flooded(server):
    return asyncio.run(flood(server))


def test_commands_past_the_wait_bound_are_refused_at_once_with_retry_after(flooded):
    answers, _, _ = flooded
    ran = [r for r, _ in answers if r.status_code == 200]
    refused = [(r, took) for r, took in answers if r.status_code != 200]
    assert ran and refused  # SLEEP_S each on one sandbox: one runs, one waits its turn, the rest would wait too long
    assert all(r.json()["exit_code"] == 0 for r in ran), [r.text for r in ran]
    assert all(r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 for r, _ in refused), \
        [r.text for r, _ in refused]
    assert max(took for _, took in refused) < FAST_S


def test_a_session_created_while_the_pool_is_past_the_bound_is_refused_with_retry_after(flooded):
    _, created, _ = flooded
    assert created.status_code == 429, created.text
    assert int(created.headers["Retry-After"]) >= 1 and "queued ahead" in created.text


def test_health_answers_while_session_commands_flood(flooded):
    _, _, health = flooded
    assert health and max(health) < FAST_S


def test_after_the_flood_sessions_and_commands_are_admitted_again(server, flooded):
    with httpx.Client(base_url=server, timeout=120) as c:
        r = c.post("/repos", content=repo_archive({"README": b"after\n"}),
                   headers={"content-type": "application/gzip"})
        r = c.post("/sessions", json={"repo": {"id": r.json()["id"]}})
        assert r.status_code == 201, r.text
        r = c.post(f"/sessions/{r.json()['session_id']}/exec", json={"command": "echo again"})
        assert r.status_code == 200 and r.json()["stdout"] == "again\n", r.text


def test_in_distributed_mode_a_worker_refuses_commands_past_the_bound_at_once(redis_server, procs):  # noqa: F811
    _, _, _, _, url = start_cluster(redis_server, procs, workers=1, REWARDBOX_SESSION_POOL_SIZE="1",
                                    REWARDBOX_MAX_WAIT_S=str(MAX_WAIT_S))

    async def main() -> list[tuple[httpx.Response, float]]:
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            r = await c.post("/repos", content=repo_archive({"README": b"dist\n"}),
                             headers={"content-type": "application/gzip"})
            sids = [(await new_session(c, r.json()["id"])).json()["session_id"] for _ in range(4)]

            async def call(sid: str) -> tuple[httpx.Response, float]:
                t0 = time.monotonic()
                r = await c.post(f"/sessions/{sid}/exec", json={"command": f"sleep {SLEEP_S}", "timeout_s": 10})
                return r, time.monotonic() - t0

            return await asyncio.gather(*(call(s) for s in sids))

    answers = asyncio.run(main())
    refused = [(r, took) for r, took in answers if r.status_code != 200]
    assert any(r.status_code == 200 for r, _ in answers) and refused
    assert all(r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 for r, _ in refused), \
        [r.text for r, _ in refused]
    assert max(took for _, took in refused) < FAST_S
