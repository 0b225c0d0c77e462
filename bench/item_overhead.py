"""Benchmark: one trivial `binary` item over HTTP, next to a bare python start and the pool's round trip.

    .venv/bin/python bench/item_overhead.py                       # over HTTP (starts `rewardbox serve`)
    .venv/bin/python bench/item_overhead.py --against /tmp/base   # also another checkout's server, alternately
    .venv/bin/python bench/item_overhead.py --split               # in-process: where the host's time goes

Over HTTP (the issue-16 target: the item's p50 <= 0.6x the bare start's), each round measures, in a rotating
order so that all meet the same load:
  bare start   a fresh `/usr/bin/python3 -c pass` on the host
  pool         the RunJob the service sends for the item, through a warm pool of this process (same backend)
  http[tree]   POST /reward with the item, to a `rewardbox serve` of this checkout (and of --against's)
Items: `script` (a program, no tests: what bench/humaneval.py sends) and `io` (a program and one io case). Each
is unique (a nonce comment), so the result cache cannot answer; every answer is checked to be a real run that
passed. `host ms` is the item's time over HTTP less the tests stage the service itself reports (details.timings):
HTTP, validation, keying, admission, results, metrics, the rollout store.

--split scores the same items in this process (create_app over a real pool, an httpx ASGI client) with a span
around each stage, and prints the medians; --cprofile adds cProfile's top functions. It measures the checkout it
is run from (copy it into another to split that one). The in-process client is httpx's ASGI transport, which
itself costs ~0.1-0.2 ms a request (it tries to import trio each time). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from humaneval import free_port, stop_server, wait_ready  # noqa: E402

from sandboxes import Result, RunJob, SandboxPool, Status, choose_backend  # noqa: E402

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
TARGET = 0.6  # http p50 / bare start p50 (issue 16)
IO_CASE = {"stdin": "1\n", "stdout": "1\n"}


def item_of(kind: str, i: int) -> dict[str, Any]:
    nonce = os.urandom(4).hex()
    if kind == "io":
        return {"code": f"print(input())  # {i} {nonce}\n", "profile": "binary",
                "tests": {"kind": "io", "cases": [IO_CASE]}}
    return {"code": f"x = {i}  # {nonce}\n", "profile": "binary"}


def job_of(kind: str, i: int) -> RunJob:
    """The job the service sends for item_of(kind, i) (graders/tests.py: _run_program, default limits)."""
    from graders.tests import job_limits

    item = item_of(kind, i)
    return RunJob(program={"code": item["code"], "filename": "solution.py"},
                  stdin=IO_CASE["stdin"] if kind == "io" else "", limits=job_limits(10.0, 512, 120.0))


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# -- over HTTP


def start(tree: Path, db_dir: str) -> tuple[subprocess.Popen, str]:
    """`rewardbox serve` of the checkout at `tree` (run from there: its packages come first on sys.path)."""
    port = free_port()
    env = {**os.environ, "REWARDBOX_DB": os.path.join(db_dir, f"{port}.sqlite3")}
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], cwd=tree, env=env, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, None, 120.0)
    return proc, url


def post_item(client: httpx.Client, url: str, item: dict[str, Any]) -> tuple[float, float]:
    """(ms over HTTP, ms of the tests stage the service reports); raises unless a real run that passed answered."""
    t = time.perf_counter()
    r = client.post(f"{url}/reward", json=item)
    ms = (time.perf_counter() - t) * 1000
    r.raise_for_status()
    body = r.json()
    details = body.get("details") or {}
    if body["status"] != "passed" or details.get("cache_hit") or not timings_of(body):
        raise RuntimeError(f"not a passing real run: {body}")
    timings = timings_of(body)
    return ms, timings.get("tests_ms", 0.0) + timings.get("queue_ms", 0.0)


def timings_of(body: dict[str, Any]) -> dict[str, float]:
    """The stages a real run reports (binary: 1.0 with every test passed; a program without tests gets 0.0)."""
    return (body.get("details") or {}).get("timings") or {}


def bare_start() -> float:
    t = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return (time.perf_counter() - t) * 1000


async def http_rounds(urls: dict[str, str], backend: str, kinds: list[str], n: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = defaultdict(list)
    pool = SandboxPool(choose_backend(backend), size=1, acquire_timeout_s=120)
    await pool.start()
    loop = asyncio.get_running_loop()
    try:
        with httpx.Client(timeout=60.0) as client:
            for url in urls.values():  # warm: connections, first-request imports, lint-free paths
                for kind in kinds:
                    for i in range(5):
                        post_item(client, url, item_of(kind, i))
            for i in range(n):
                steps: list[tuple[str, Callable[[], Any]]] = [("bare start", bare_start)]
                for kind in kinds:
                    steps.append((f"pool {kind}", functools.partial(pool_once, pool, kind, i)))
                    for tree, url in urls.items():
                        steps.append((f"http[{tree}] {kind}", functools.partial(post_item, client, url,
                                                                                item_of(kind, i))))
                k = i % len(steps)
                for name, step in steps[k:] + steps[:k]:
                    if name.startswith("pool"):
                        samples[name].append(await step())
                    else:
                        value = await loop.run_in_executor(None, step)  # the loop stays free for nothing else
                        if isinstance(value, tuple):
                            samples[name].append(value[0])
                            samples[name.replace("http", "host", 1)].append(value[0] - value[1])
                        else:
                            samples[name].append(value)
    finally:
        await pool.close()
    return samples


async def pool_once(pool: SandboxPool, kind: str, i: int) -> float:
    job = job_of(kind, i)
    t = time.perf_counter()
    result: Result = await pool.run(job)
    ms = (time.perf_counter() - t) * 1000
    if result.status != Status.OK:
        raise RuntimeError(f"pool job failed: {result}")
    return ms


def run_http(args: argparse.Namespace) -> int:
    trees = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    db_dir = tempfile.mkdtemp(prefix="rewardbox-item-overhead-")
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for tree, path in trees.items():
            servers[tree] = start(path, db_dir)
        urls = {tree: url for tree, (_, url) in servers.items()}
        backend = httpx.get(f"{next(iter(urls.values()))}/v1/info").json()["sandbox"]["backend"]
        kinds = args.kinds.split(",")
        print(f"backend {backend}; {args.n} rounds x {args.repeats}; trees: "
              + ", ".join(f"{t}={p}" for t, p in trees.items()) + f"; load {os.getloadavg()[0]:.2f}")
        for rep in range(args.repeats):
            samples = asyncio.run(http_rounds(urls, backend, kinds, args.n))
            bare = p50(samples["bare start"])
            print(f"repetition {rep + 1}: every item a real run that passed (unique content; no cache answered); "
                  f"load {os.getloadavg()[0]:.2f}")
            print(f"  {'bare start /usr/bin/python3 -c pass':<34} p50 {bare:6.2f} ms")
            for name in sorted(samples):
                if name == "bare start":
                    continue
                v = p50(samples[name])
                note = f"  {v / bare:.2f}x bare" if name.startswith(("http", "pool")) else ""
                if name.startswith("http") and v / bare <= TARGET:
                    note += f" (target <= {TARGET}x: met)"
                print(f"  {name:<34} p50 {v:6.2f} ms  p90 {sorted(samples[name])[int(0.9 * len(samples[name]))]:6.2f}"
                      f"{note}")
    finally:
        for proc, _ in servers.values():
            stop_server(proc)
    return 0


# -- in process: per-stage spans


class Spans:
    def __init__(self) -> None:
        self.ns: dict[str, list[int]] = defaultdict(list)

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)
        spans = self.ns[label]
        if asyncio.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed_async(*a: Any, **kw: Any) -> Any:
                t = time.perf_counter_ns()
                try:
                    return await fn(*a, **kw)
                finally:
                    spans.append(time.perf_counter_ns() - t)
            setattr(owner, name, timed_async)
        else:
            @functools.wraps(fn)
            def timed(*a: Any, **kw: Any) -> Any:
                t = time.perf_counter_ns()
                try:
                    return fn(*a, **kw)
                finally:
                    spans.append(time.perf_counter_ns() - t)
            setattr(owner, name, timed)

    def ms(self, label: str) -> float:
        return p50([v / 1e6 for v in self.ns.get(label, [])])

    def clear(self) -> None:
        for v in self.ns.values():
            v.clear()


STAGES = [  # (label, indent): the spans, nested as they run
    ("request (ASGI, in-process client)", 0),
    ("executor.score_many", 1),
    ("checked: validate, key, dump", 2),
    ("_new_work: result cache + store lookup", 2),
    ("scorer.score", 2),
    ("run_tests", 3),
    ("pool.run (sandbox round trip)", 4),
    ("flags_for (in its thread)", 4),
    ("_finish", 2),
    ("metrics.observe_item", 3),
    ("store.add", 3),
]


async def split(kinds: list[str], n: int, profile: bool) -> None:
    import graders.tests
    import service.executor
    import service.scoring
    from service.app import create_app
    from service.config import Settings

    db = os.path.join(tempfile.mkdtemp(prefix="rewardbox-split-"), "rollouts.sqlite3")
    app = create_app(Settings(db=db))
    spans = Spans()
    async with app.router.lifespan_context(app):
        ex = app.state.executor
        spans.wrap(ex, "score_many", "executor.score_many")
        spans.wrap(service.executor, "checked", "checked: validate, key, dump")
        spans.wrap(ex, "_new_work", "_new_work: result cache + store lookup")
        spans.wrap(ex.scorer, "score", "scorer.score")
        spans.wrap(service.scoring, "run_tests", "run_tests")
        spans.wrap(app.state.pool, "run", "pool.run (sandbox round trip)")
        spans.wrap(graders.tests, "flags_for", "flags_for (in its thread)")
        spans.wrap(ex, "_finish", "_finish")
        spans.wrap(ex.metrics, "observe_item", "metrics.observe_item")
        if ex.store is not None:
            spans.wrap(ex.store, "add", "store.add")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in-process") as client:
            for kind in kinds:
                for i in range(10):  # warm
                    await client.post("/reward", json=item_of(kind, i))
                spans.clear()
                prof = cProfile.Profile() if profile else None
                total = spans.ns["request (ASGI, in-process client)"]
                for i in range(n):
                    item = item_of(kind, i)
                    if prof:
                        prof.enable()
                    t = time.perf_counter_ns()
                    r = await client.post("/reward", json=item)
                    total.append(time.perf_counter_ns() - t)
                    if prof:
                        prof.disable()
                    body = r.json()
                    real = body["status"] == "passed" and not body["details"].get("cache_hit") and timings_of(body)
                    assert real, body
                print(f"\n{kind} item, {n} real runs in-process (p50 ms per span; a span includes those below it):")
                for label, indent in STAGES:
                    print(f"  {'  ' * indent}{label:<{44 - 2 * indent}} {spans.ms(label):7.3f}")
                host = spans.ms("request (ASGI, in-process client)") - spans.ms("pool.run (sandbox round trip)")
                print(f"  request less pool.run (host side, p50 difference){'':<4}{host:7.3f}")
                if prof:
                    out = io.StringIO()
                    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
                    print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="rounds per repetition (default 100)")
    ap.add_argument("--repeats", type=int, default=3, help="repetitions over HTTP (default 3)")
    ap.add_argument("--kinds", default="script,io", help="items: script (no tests), io (one case)")
    ap.add_argument("--against", type=Path, help="another rewardbox checkout whose server is measured alongside")
    ap.add_argument("--split", action="store_true", help="in-process per-stage spans instead of HTTP")
    ap.add_argument("--cprofile", action="store_true", help="with --split: cProfile's top functions too")
    args = ap.parse_args(argv)
    if args.split:
        asyncio.run(split(args.kinds.split(","), args.n, args.cprofile))
        return 0
    return run_http(args)


if __name__ == "__main__":
    sys.exit(main())
