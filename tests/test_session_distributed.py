"""Agent sessions in distributed mode: a session pinned to one worker, its calls routed there through Redis from
any API process, a reward graded through the queue, and a killed worker's sessions answering 410 at once."""

from __future__ import annotations

import json
import signal
import time

import httpx

from rewardbox.archive import repo_archive

from .distributed import start_api, start_cluster, stop
from .test_distributed import procs, redis_server  # noqa: F401 - the fixtures

CALC = {"pkg/__init__.py": b"", "pkg/calc.py": b"def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": b"from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_calc.py::test_add"]}


def test_sessions_are_pinned_to_a_worker_routed_through_redis_and_die_with_it(redis_server, procs):  # noqa: F811
    prefix, env, r, _api, url = start_cluster(redis_server, procs, workers=2)
    other_api, other_url = start_api(env)
    procs.append(other_api)
    with httpx.Client(base_url=url, timeout=120) as api, httpx.Client(base_url=other_url, timeout=120) as other:
        repo = api.post("/repos", content=repo_archive(CALC), headers={"content-type": "application/gzip"}).json()["id"]
        sids = []
        for _ in range(2):
            created = api.post("/sessions", json={"repo": {"id": repo}})
            assert created.status_code == 201, created.text
            sids.append(created.json()["session_id"])
        owners = {sid: json.loads(r.hget(f"{prefix}:sessions", sid))["owner"] for sid in sids}
        assert len(set(owners.values())) == 2  # the fewest-sessions worker takes each new one
        first = sids[0]
        out = other.post(f"/sessions/{first}/exec", json={"command": "sed -i 's/a - b/a + b/' pkg/calc.py; echo ok"})
        assert out.status_code == 200 and out.json()["stdout"] == "ok\n", out.text
        assert "a + b" in api.get(f"/sessions/{first}/files", params={"path": "pkg/calc.py"}).json()["content"]
        kids = other.post(f"/sessions/{first}/fork", json={"n": 2}).json()["session_ids"]
        assert {json.loads(r.hget(f"{prefix}:sessions", k))["owner"] for k in kids} == {owners[first]}
        listed = {s["session_id"]: s for s in api.get("/sessions").json()["sessions"]}
        assert set(sids + kids) <= set(listed) and listed[first]["owner"] == owners[first]
        result = api.post(f"/sessions/{first}/reward", json={"tests": TESTS}).json()
        assert result["status"] == "passed", result
        assert api.delete(f"/sessions/{kids[0]}").status_code == 200
        gone = other.post(f"/sessions/{kids[0]}/exec", json={"command": "true"})
        assert gone.status_code == 410 and "deleted" in gone.text

        victim = sids[1]
        worker_procs = procs[:2]
        names = sorted(json.loads(b)["consumer"] for b in r.hgetall(f"{prefix}:workers").values())
        victim_proc = next(p for p in worker_procs if f":{p.pid}:" in owners[victim])
        assert owners[victim] in names
        stop(victim_proc, signal.SIGKILL, 10)
        time.sleep(11)  # its heartbeat goes stale (DEAD_AFTER_S)
        started = time.monotonic()
        dead = api.post(f"/sessions/{victim}/exec", json={"command": "true"})
        assert dead.status_code == 410 and "died" in dead.text and time.monotonic() - started < 3, dead.text
        assert victim not in {s["session_id"] for s in api.get("/sessions").json()["sessions"]}
        assert api.post(f"/sessions/{first}/exec", json={"command": "true"}).json()["status"] == "ok"


def test_a_flood_of_session_commands_is_run_or_refused_with_retry_after_never_a_500(redis_server, procs):  # noqa: F811
    """150 commands at once through one API process: each gets its result or a 429 with Retry-After (the worker's
    session pool line, REWARDBOX_MAX_WAIT_S), never a 500 (calls waiting for answers used to hold a Redis
    connection each, past the client's 100)."""
    import asyncio

    _prefix, _env, _r, _api, url = start_cluster(redis_server, procs, workers=1, REWARDBOX_MAX_WAIT_S="4",
                                                REWARDBOX_SESSIONS_MAX="200")

    async def flood() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            repo = (await client.post("/repos", content=repo_archive(CALC),
                                      headers={"content-type": "application/gzip"})).json()["id"]
            sids = [(await client.post("/sessions", json={"repo": {"id": repo}})).json()["session_id"]
                    for _ in range(150)]
            return await asyncio.gather(*(client.post(f"/sessions/{sid}/exec", json={
                "command": "sleep 2; echo ok", "timeout_s": 5}) for sid in sids))

    answers = asyncio.run(flood())
    codes = {r.status_code for r in answers}
    assert codes == {200, 429}, [r.text for r in answers if r.status_code not in (200, 429)][:3]
    assert all(r.json()["stdout"] == "ok\n" for r in answers if r.status_code == 200)
    assert all(int(r.headers["Retry-After"]) >= 1 for r in answers if r.status_code == 429)
