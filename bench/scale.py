"""Benchmark: distributed mode's throughput with 1, 2 and 4 worker processes, latency under steady load, and the
per-item overhead of going through Redis, each against embedded mode measured in the same run.

    .venv/bin/python bench/scale.py              # table
    .venv/bin/python bench/scale.py --json       # one JSON document

Real processes: a redis-server of our own (random port), `rewardbox worker`s and `rewardbox serve`, real HTTP.
Every worker and the embedded server own a pool of ONE sandbox, so "N workers" means N sandboxes. Items are cheap
(`binary` profile, one function case) and all distinct; the result cache is off, so that every item runs.
On a 2-core machine more than 2 workers cannot add throughput: the figures say what the box allows.
Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import start_server, stop_server  # noqa: E402
from tests.distributed import (  # noqa: E402 - the same process harness as the distributed-mode tests
    RedisServer,
    new_prefix,
    service_env,
    start_api,
    start_worker,
    stop,
    wait_for_workers,
)

COMMON = {"REWARDBOX_POOL_SIZE": "1", "REWARDBOX_RESULT_CACHE_SIZE": "0", "REWARDBOX_MAX_BATCH": "2000",
          "REWARDBOX_BACKEND": os.environ.get("REWARDBOX_BACKEND", "docker")}


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def items(n: int) -> list[dict]:
    tag = uuid.uuid4().hex[:8]
    return [{"id": f"{tag}-{i}", "code": f"def f():\n    return {i}  # {tag}\n", "profile": "binary",
             "tests": {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": i}]}}
            for i in range(n)]


def percentile(ms: list[float], q: float) -> float:
    ms = sorted(ms)
    return ms[min(len(ms) - 1, max(0, round(q * len(ms)) - 1))]


def latency_pair(embedded_url: str, distributed_url: str, n: int) -> dict:
    """One item at a time, alternating between the two modes, so that both see the same load on the box."""
    samples: dict[str, list[float]] = {"embedded": [], "distributed": []}
    with httpx.Client(timeout=60) as client:
        for i, it in enumerate(items(2 * (n + 10))):
            mode, url = ("embedded", embedded_url) if i % 2 == 0 else ("distributed", distributed_url)
            t0 = time.perf_counter()
            assert client.post(url + "/reward", json=it).json()["status"] == "passed"
            samples[mode].append((time.perf_counter() - t0) * 1000)
    out = {}
    for mode, ms in samples.items():
        ms = ms[10:]  # warm-up
        out[mode] = {"n": len(ms), "p50_ms": statistics.median(ms), "p90_ms": percentile(ms, 0.9),
                     "p99_ms": percentile(ms, 0.99)}
    diffs = [d - e for e, d in zip(samples["embedded"][10:], samples["distributed"][10:], strict=True)]
    out["paired_p50_overhead_ms"] = statistics.median(diffs)
    return out


def throughput(url: str, n: int) -> dict:
    batch = items(n)
    t0 = time.perf_counter()
    results = httpx.post(url + "/reward/batch", json={"items": batch}, timeout=600).json()["results"]
    wall = time.perf_counter() - t0
    assert all(r["status"] == "passed" for r in results), {r["status"] for r in results}
    return {"items": n, "wall_s": wall, "items_per_s": n / wall}


def steady(url: str, clients: int, seconds: float) -> dict:
    """`clients` clients each posting one item at a time for `seconds`: latency percentiles at that load."""
    stop_at = time.monotonic() + seconds

    def client_loop(_: int) -> list[float]:
        out = []
        with httpx.Client(base_url=url, timeout=60) as client:
            while time.monotonic() < stop_at:
                it = items(1)[0]
                t0 = time.perf_counter()
                assert client.post("/reward", json=it).json()["status"] == "passed"
                out.append((time.perf_counter() - t0) * 1000)
        return out

    with ThreadPoolExecutor(clients) as pool:
        samples = [s for chunk in pool.map(client_loop, range(clients)) for s in chunk]
    return {"clients": clients, "items": len(samples), "items_per_s": len(samples) / seconds,
            "p50_ms": statistics.median(samples), "p90_ms": percentile(samples, 0.9),
            "p99_ms": percentile(samples, 0.99)}


def distributed(redis: RedisServer, workers: int, embedded_url: str, args: argparse.Namespace) -> dict:
    """Throughput and steady load with `workers` workers, each run next to an embedded run (the baseline of that
    moment: the box is shared, its load drifts); the single-item overhead with one worker."""
    prefix = new_prefix()
    env = service_env(redis.url, prefix, **COMMON)
    procs = [start_worker(env) for _ in range(workers)]
    try:
        wait_for_workers(redis.client(), prefix, workers)
        api, url = start_api(env)
        procs.append(api)
        runs = [(throughput(embedded_url, args.batch)["items_per_s"], throughput(url, args.batch)["items_per_s"])
                for _ in range(args.rounds)]
        out = {"workers": workers, "embedded_items_per_s": statistics.median(e for e, _ in runs),
               "items_per_s": statistics.median(d for _, d in runs),
               "ratio": statistics.median(d / e for e, d in runs),
               "steady": steady(url, args.clients, args.seconds),
               "steady_embedded": steady(embedded_url, args.clients, args.seconds)}
        if workers == 1:
            out["latency"] = latency_pair(embedded_url, url, args.latency_n)
        return out
    finally:
        for p in reversed(procs):
            stop(p, signal.SIGTERM, 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=400)
    parser.add_argument("--latency-n", type=int, default=150)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict = {"cpus": os.cpu_count(), "backend": COMMON["REWARDBOX_BACKEND"], "load_before": loadavg()}
    db = os.path.join(tempfile.mkdtemp(prefix="rewardbox-bench-"), "rollouts.sqlite3")
    embedded_proc, embedded_url = start_server({**COMMON, "REWARDBOX_DB": db})
    redis = RedisServer()
    redis.start()
    try:
        report["distributed"] = [distributed(redis, int(w), embedded_url, args) for w in args.workers.split(",")]
    finally:
        redis.stop()
        stop_server(embedded_proc)
    report["load_after"] = loadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['cpus']} CPUs, {report['backend']} backend, one sandbox per worker and for embedded mode; "
          f"load average {report['load_before']} before, {report['load_after']} after (other work on the box)")
    print(f"\nthroughput, /reward/batch of {args.batch} cheap items, median of {args.rounds} rounds, each next to an"
          f" embedded round:")
    for d in report["distributed"]:
        print(f"  distributed, {d['workers']} worker(s) {d['items_per_s']:7.1f} items/s   embedded alongside"
              f" {d['embedded_items_per_s']:7.1f} items/s   ratio {d['ratio']:.2f}x")
    lat = report["distributed"][0]["latency"]
    print(f"\none item at a time, the two modes alternating (n={lat['embedded']['n']} each):   p50       p90      p99")
    for name in ("embedded", "distributed"):
        row = lat[name]
        print(f"  {name + (' (1 worker)' if name == 'distributed' else ''):24s}"
              f" {row['p50_ms']:7.2f}ms {row['p90_ms']:7.2f}ms {row['p99_ms']:7.2f}ms")
    print(f"  p50 overhead of distributed mode: {lat['distributed']['p50_ms'] - lat['embedded']['p50_ms']:+.2f} ms"
          f" (median of paired differences {lat['paired_p50_overhead_ms']:+.2f} ms)")
    print(f"\nsteady load, {args.clients} clients x {args.seconds:g}s, one item per request:")
    for d in report["distributed"]:
        for name, st in ((f"distributed, {d['workers']} worker(s)", d["steady"]), ("  embedded alongside",
                                                                                d["steady_embedded"])):
            print(f"  {name:25s} {st['items_per_s']:6.1f} items/s  p50 {st['p50_ms']:6.2f}ms  p90 {st['p90_ms']:6.2f}ms"
                  f"  p99 {st['p99_ms']:7.2f}ms")


if __name__ == "__main__":
    main()
