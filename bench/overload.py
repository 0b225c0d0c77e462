"""Benchmark: the service under a flood, in both modes.

`--flood batch` (default): 12 clients each post a /reward/batch of 1,000 distinct cheap items at the same moment,
against the default bound of 2,048 queued test cases; meanwhile /healthz is probed every 50 ms. Prints how fast the
refused requests were answered, how fast health was answered (next to the same probe on the idle service: the
baseline of this run), and what became of every accepted item.

`--flood sleep`: 200 concurrent calls of `time.sleep(2)` (each its own request: `/run_code`, then `/reward`, then
a session command `sleep 2` in each of 200 open sessions) against a pool of 2 (and the session pool of 2), with an
80 s client timeout: every call must be answered (its result) or refused fast (429/504 with Retry-After,
service/wait_line.py) within that timeout, /healthz answering meanwhile. `--unbounded` runs the same
flood again with REWARDBOX_MAX_WAIT_S and REWARDBOX_DEADLINE_S at 3600 (no refusal by time: the behaviour before
it) as this run's baseline.

    .venv/bin/python bench/overload.py                  # both modes, table
    .venv/bin/python bench/overload.py --modes embedded --clients 6 --items 500 --json
    .venv/bin/python bench/overload.py --flood sleep --modes embedded --unbounded

Bounded and local: loopback only (127.0.0.1), a fixed number of requests, every request with a timeout. Real
processes: `rewardbox serve` (embedded: its own pool), and for distributed mode a redis-server of our own, one
`rewardbox worker` and `rewardbox serve` with REDIS_URL. Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import items, loadavg, percentile  # noqa: E402 - the same cheap items and figures
from tests import distributed as harness  # noqa: E402 - the same process harness as the tests
from tests.conftest import start_server, stop_server  # noqa: E402

COMMON = {"REWARDBOX_MAX_BATCH": "1000", "REWARDBOX_MAX_BODY_MB": "64", "REWARDBOX_MAX_QUEUED": "2048",
          "REWARDBOX_POOL_SIZE": str(os.cpu_count() or 2), "REWARDBOX_RESULT_CACHE_SIZE": "0",
          "REWARDBOX_BACKEND": os.environ.get("REWARDBOX_BACKEND", "docker")}


def summary(ms: list[float]) -> dict:
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p99_ms": percentile(ms, 0.99), "max_ms": max(ms)}


def probe(url: str, stop_at: threading.Event | float, every_s: float = 0.05) -> list[float]:
    """GET /healthz every `every_s` until the event is set (or for that many seconds)."""
    out = []
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + stop_at if isinstance(stop_at, float) else None
        while not (stop_at.is_set() if isinstance(stop_at, threading.Event) else time.monotonic() > deadline):
            t0 = time.perf_counter()
            client.get(url + "/healthz").raise_for_status()
            out.append((time.perf_counter() - t0) * 1000)
            time.sleep(every_s)
    return out


def flood(url: str, clients: int, per_request: int) -> dict:
    baseline = summary(probe(url, 3.0))
    batches = [json.dumps({"items": items(per_request)}).encode() for _ in range(clients)]  # encoded before t0
    start = threading.Barrier(clients + 1)
    done = threading.Event()

    def post(batch: bytes) -> tuple[int, float, list[str]]:
        with httpx.Client(timeout=600, headers={"content-type": "application/json"}) as client:
            start.wait()
            t0 = time.perf_counter()
            res = client.post(url + "/reward/batch", content=batch)
            took = (time.perf_counter() - t0) * 1000
        return res.status_code, took, [r["status"] for r in res.json()["results"]] if res.status_code == 200 else []

    with ThreadPoolExecutor(clients + 1) as pool:
        health = pool.submit(probe, url, done)
        futures = [pool.submit(post, b) for b in batches]
        start.wait()
        answers = [f.result() for f in futures]
        done.set()
        under_flood = summary(health.result())
    outcomes = Counter(s for code, _, statuses in answers if code == 200 for s in statuses)
    return {"clients": clients, "items_per_request": per_request,
            "accepted_requests": sum(code == 200 for code, _, _ in answers),
            "refused": Counter(str(code) for code, _, _ in answers if code != 200),
            "rejection": summary([ms for code, ms, _ in answers if code == 429]),
            "accepted_latency": summary([ms for code, ms, _ in answers if code == 200]),
            "health_idle": baseline, "health_under_flood": under_flood, "accepted_outcomes": dict(outcomes)}


SLEEP = "import time\ntime.sleep(2)\nprint('done')\n"


SESSIONS = "sessions"  # the third flood: one command in each of `calls` open sessions


def sleep_request(route: str, i: int) -> dict:
    if route == SESSIONS:
        return {"command": f"sleep 2; echo done # {i}", "timeout_s": 10}
    if route == "/run_code":
        return {"code": SLEEP + f"# {i}\n", "language": "python", "run_timeout": 10}
    return {"code": SLEEP + f"# {i}\n", "profile": "binary",  # distinct: no cache hit, no sharing
            "tests": {"kind": "io", "cases": [{"stdout": "done\n"}]}}


async def open_sessions(client: httpx.AsyncClient, n: int) -> list[str]:
    """n sessions on a one-file repository, opened before the flood (one at a time: not what is measured)."""
    from rewardbox.archive import repo_archive

    r = await client.post("/repos", content=repo_archive({"README": b"bench\n"}),
                          headers={"content-type": "application/gzip"})
    r.raise_for_status()
    repo = {"repo": {"id": r.json()["id"]}}
    sids = []
    for _ in range(n):
        r = await client.post("/sessions", json=repo)
        r.raise_for_status()
        sids.append(r.json()["session_id"])
    return sids


async def sleep_calls(url: str, route: str, calls: int, timeout_s: float
                      ) -> tuple[list[tuple[str, float, str]], float]:
    """(outcome, seconds, Retry-After) per call, and the flood's wall time (sessions are opened before it).
    Outcomes: ok, refused (429/504 with Retry-After before the wait), late (504: admitted, not started in time;
    429 "did not get a sandbox" for a session command), no_answer (the client's timeout), or the status."""
    limits = httpx.Limits(max_connections=calls + 10, max_keepalive_connections=calls + 10)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:
        sids = await open_sessions(client, calls) if route == SESSIONS else []

        async def one(i: int) -> tuple[str, float, str]:
            path = f"/sessions/{sids[i]}/exec" if route == SESSIONS else route
            t0 = time.perf_counter()
            try:
                r = await client.post(path, json=sleep_request(route, i))
            except httpx.TimeoutException:
                return "no_answer", time.perf_counter() - t0, ""
            took = time.perf_counter() - t0
            if r.status_code == 200:
                return "ok", took, ""
            if r.status_code in (429, 503, 504):
                late = "not started" in r.text or "did not get a sandbox" in r.text
                if os.environ.get("BENCH_DEBUG"):
                    print(r.status_code, r.text[:300])
                return "late" if late else "refused", took, r.headers.get("retry-after", "")
            return str(r.status_code), took, ""

        t0 = time.perf_counter()
        answers = await asyncio.gather(*[one(i) for i in range(calls)])
        return answers, time.perf_counter() - t0


def sleep_flood(url: str, calls: int, timeout_s: float) -> dict:
    out: dict = {"health_idle": summary(probe(url, 3.0))}
    for route in ("/run_code", "/reward", SESSIONS):
        done = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            health = pool.submit(probe, url, done)
            answers, wall = asyncio.run(sleep_calls(url, route, calls, timeout_s))
            done.set()
            out[route] = {"wall_s": round(wall, 1), "outcomes": dict(Counter(o for o, _, _ in answers)),
                          "calls": calls, "client_timeout_s": timeout_s,
                          "answered_in_time": sum(1 for o, s, _ in answers if o != "no_answer" and s < timeout_s),
                          "retry_after_given": sum(1 for o, _, ra in answers if o in ("refused", "late") and ra),
                          **{o: summary([s * 1000 for x, s, _ in answers if x == o])
                             for o in ("ok", "refused", "late", "no_answer")},
                          "health_under_flood": summary(health.result())}
    return out


def run_flood(args: argparse.Namespace, url: str) -> dict:
    if args.flood == "sleep":
        return sleep_flood(url, args.calls, args.timeout)
    return flood(url, args.clients, args.items)


def settings_env(args: argparse.Namespace, unbounded: bool = False) -> dict[str, str]:
    env = dict(COMMON)
    if args.flood == "sleep":  # the flood of the issue: the default pool of 2, no result cache
        env["REWARDBOX_POOL_SIZE"] = "2"
        env["REWARDBOX_SESSIONS_MAX"] = str(args.calls + 10)  # every call its own open session
    if unbounded:  # no refusal by time: admitted whatever the wait, answered 504 only after the deadline
        env["REWARDBOX_MAX_WAIT_S"] = env["REWARDBOX_DEADLINE_S"] = "3600"
    return env


def embedded(args: argparse.Namespace, unbounded: bool = False) -> dict:
    db = os.path.join(tempfile.mkdtemp(prefix="rewardbox-bench-"), "rollouts.sqlite3")
    proc, url = start_server({**settings_env(args, unbounded), "REWARDBOX_DB": db})
    try:
        return run_flood(args, url)
    finally:
        stop_server(proc)


def distributed(args: argparse.Namespace, unbounded: bool = False) -> dict:
    redis = harness.RedisServer()
    redis.start()
    prefix = harness.new_prefix()
    env = harness.service_env(redis.url, prefix, **settings_env(args, unbounded))
    procs = [harness.start_worker(env)]
    try:
        harness.wait_for_workers(redis.client(), prefix, 1)
        api, url = harness.start_api(env)
        procs.append(api)
        return run_flood(args, url)
    finally:
        for p in reversed(procs):
            harness.stop(p, signal.SIGTERM, 30)
        redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--modes", default="embedded,distributed")
    parser.add_argument("--flood", choices=("batch", "sleep"), default="batch")
    parser.add_argument("--calls", type=int, default=200, help="--flood sleep: concurrent calls per route")
    parser.add_argument("--timeout", type=float, default=80.0, help="--flood sleep: the client's timeout (s)")
    parser.add_argument("--unbounded", action="store_true", help="--flood sleep: also with no wait bound")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict = {"cpus": os.cpu_count(), "backend": COMMON["REWARDBOX_BACKEND"], "bound": COMMON[
        "REWARDBOX_MAX_QUEUED"], "load_before": loadavg()}
    for mode in args.modes.split(","):
        report[mode] = {"embedded": embedded, "distributed": distributed}[mode](args)
        if args.flood == "sleep" and args.unbounded:
            report[mode + " unbounded"] = {"embedded": embedded, "distributed": distributed}[mode](args, True)
    report["load_after"] = loadavg()
    if args.json or args.flood == "sleep":
        if args.flood == "sleep" and not args.json:
            print_sleep(report)
        else:
            print(json.dumps(report, indent=2))
        return
    print(f"{report['cpus']} CPUs, {report['backend']} backend, pool of {COMMON['REWARDBOX_POOL_SIZE']} sandboxes, "
          f"bound {report['bound']} test cases; load average {report['load_before']} before, "
          f"{report['load_after']} after")
    print(f"flood: {args.clients} clients x {args.items} items at once; /healthz every 50 ms\n")

    def row(name: str, s: dict) -> str:
        if not s.get("n"):
            return f"  {name:28s} (none)"
        return (f"  {name:28s} n={s['n']:<4d} p50 {s['p50_ms']:8.1f} ms  p99 {s['p99_ms']:8.1f} ms  "
                f"max {s['max_ms']:8.1f} ms")

    for mode in args.modes.split(","):
        r = report[mode]
        print(f"{mode}: {r['accepted_requests']} requests accepted, refused {dict(r['refused']) or 'none'}")
        print(row("refused requests answered", r["rejection"]))
        print(row("accepted requests answered", r["accepted_latency"]))
        print(row("/healthz, idle (baseline)", r["health_idle"]))
        print(row("/healthz, under the flood", r["health_under_flood"]))
        print(f"  accepted items: {r['accepted_outcomes']}\n")


def print_sleep(report: dict) -> None:
    print(f"{report['cpus']} CPUs, {report['backend']} backend, pool of 2 sandboxes; load average "
          f"{report['load_before']} before, {report['load_after']} after")
    for mode, r in report.items():
        if not isinstance(r, dict):
            continue
        idle = r["health_idle"]
        print(f"{mode}: /healthz idle p50 {idle['p50_ms']:.1f} ms, p99 {idle['p99_ms']:.1f} ms")
        for route in ("/run_code", "/reward", SESSIONS):
            x = r[route]
            print(f"  {route:9s} {x['outcomes']} in {x['wall_s']} s; answered within the client's "
                  f"{x['client_timeout_s']:g} s: {x['answered_in_time']} of {x['calls']}; Retry-After on "
                  f"{x['retry_after_given']} refusals")
            for outcome in ("ok", "refused", "late", "no_answer"):
                s = x[outcome]
                if s.get("n"):
                    print(f"    {outcome:10s} n={s['n']:<4d} p50 {s['p50_ms'] / 1000:6.2f} s  p99 "
                          f"{s['p99_ms'] / 1000:6.2f} s  max {s['max_ms'] / 1000:6.2f} s")
            h = x["health_under_flood"]
            print(f"    /healthz under the flood: p50 {h['p50_ms']:.1f} ms, p99 {h['p99_ms']:.1f} ms, "
                  f"max {h['max_ms']:.1f} ms")


if __name__ == "__main__":
    main()
