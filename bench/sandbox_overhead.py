"""Benchmark: the round trip of a trivial job through the warm sandbox pool, against starting a fresh sandbox.

    .venv/bin/python bench/sandbox_overhead.py            # table
    .venv/bin/python bench/sandbox_overhead.py --json     # one JSON document
    .venv/bin/python bench/sandbox_overhead.py --against /tmp/main   # also: another checkout, alternately

Measured in the same run, all with the program `pass`:
  pool[<backend>]   serial round trips of RunJob(program={"code": "pass"}) through a warm SandboxPool (each backend
                    that is available), then throughput with os.cpu_count() jobs in flight; and serial round
                    trips of a judge job (candidate process + judge process, one function case)
  docker run        `docker run --rm <sandbox image> python3 -c pass` per job (a fresh container each time)
  subprocess        a fresh `/usr/bin/python3 -c pass` per job on the host (no isolation at all: the floor)
  --against DIR     the serial round trips of this checkout and of DIR's (e.g. `git archive main` unpacked),
                    measured in rounds of two fresh processes running at the same time (so that both meet the
                    same load): what a change to the sandbox costs
Prints numbers (and the load average before and after); it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandboxes import Job, JudgeJob, Limits, RunJob, SandboxPool, Status, choose_backend  # noqa: E402
from sandboxes.backends import bubblewrap_available, docker_available  # noqa: E402
from sandboxes.image import image_name  # noqa: E402

TRIVIAL = RunJob(program={"code": "pass"}, limits=Limits(wall_s=10, cpu_s=10))
JUDGED = JudgeJob(candidate={"code": "def f(x):\n    return x + 1\n", "module": "solution"},
                  judge={"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]},
                  limits=Limits(wall_s=10, cpu_s=10))
WARMUP = 10


def summarize(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000.0 for s in samples_s)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]  # nearest rank
    return {"n": len(ms), "median_ms": statistics.median(ms), "p95_ms": p95, "mean_ms": statistics.fmean(ms),
            "min_ms": ms[0], "max_ms": ms[-1]}


async def bench_pool(backend: str, n: int, throughput_jobs: int, concurrency: int) -> dict[str, Any]:
    pool = SandboxPool(choose_backend(backend), size=concurrency, acquire_timeout_s=120)
    started = time.perf_counter()
    await pool.start()
    start_s = time.perf_counter() - started
    try:
        for _ in range(WARMUP):
            await _checked(pool)
        serial = await _serial(pool, TRIVIAL, n)
        judged = await _serial(pool, JUDGED, max(10, n // 3))
        sem = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with sem:
                await _checked(pool)

        await asyncio.gather(*(one() for _ in range(concurrency * 2)))  # every sandbox warm
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(throughput_jobs)))
        elapsed = time.perf_counter() - t0
    finally:
        await pool.close()
    return {"backend": backend, "pool_size": concurrency, "pool_start_s": start_s, "serial": summarize(serial),
            "judge_serial": summarize(judged),
            "throughput": {"jobs": throughput_jobs, "concurrency": concurrency, "seconds": elapsed,
                           "jobs_per_s": throughput_jobs / elapsed}}


async def _checked(pool: SandboxPool, job: Job = TRIVIAL) -> None:
    result = await pool.run(job)
    if result.status != Status.OK:
        raise RuntimeError(f"trivial job failed: {result}")


async def _serial(pool: SandboxPool, job: Job, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        await _checked(pool, job)
        samples.append(time.perf_counter() - t0)
    return samples


# Run in a fresh interpreter with a checkout's root first on sys.path: only API that every version of the pool has.
SERIAL_IN_TREE = r"""
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from sandboxes import Job, Limits, SandboxPool, Status, choose_backend
jobs = {"run": Job("run", program={"code": "pass"}, limits=Limits(wall_s=10, cpu_s=10)),
        "judge": Job("judge", candidate={"code": "def f(x):\n    return x + 1\n", "module": "solution"},
                     judge={"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]},
                     limits=Limits(wall_s=10, cpu_s=10))}

async def main(backend, n):
    pool = SandboxPool(choose_backend(backend), size=1, acquire_timeout_s=120)
    await pool.start()
    out = {}
    try:
        for name, job in jobs.items():
            samples = []
            for i in range(n + 10):
                t0 = time.perf_counter()
                result = await pool.run(job)
                if result.status != Status.OK:
                    raise RuntimeError(f"{name} job failed: {result}")
                if i >= 10:
                    samples.append(time.perf_counter() - t0)
            out[name] = samples
    finally:
        await pool.close()
    print(json.dumps(out))

asyncio.run(main(sys.argv[2], int(sys.argv[3])))
"""


def bench_against(other: Path, backends: list[str], n: int, rounds: int) -> dict[str, Any]:
    """Serial round trips of this checkout and of `other`, each round in two fresh processes that run at the same
    time: on a shared, noisy machine both then meet the same load (one after the other, the load of the moment
    decided the ratio: 0.8x to 1.8x between runs)."""
    trees = {"this": ROOT, "against": other}
    report: dict[str, Any] = {"against": str(other), "rounds": rounds, "backends": {}, "concurrent": True}
    for backend in backends:
        samples: dict[str, dict[str, list[float]]] = {t: {"run": [], "judge": []} for t in trees}
        for r in range(rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            procs = {t: subprocess.Popen([sys.executable, "-c", SERIAL_IN_TREE, str(trees[t]), backend, str(n)],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for t in order}
            for tree, proc in procs.items():
                out, _ = proc.communicate(timeout=1800)
                if proc.returncode != 0:
                    raise RuntimeError(f"measuring {trees[tree]} failed")
                for job, values in json.loads(out.strip().splitlines()[-1]).items():
                    samples[tree][job] += values
        report["backends"][backend] = {t: {job: summarize(v) for job, v in jobs.items()}
                                       for t, jobs in samples.items()}
    return report


def bench_command(argv: list[str], n: int, warmup: int = 1) -> dict[str, float]:
    for _ in range(warmup):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t0)
    return summarize(samples)


def render(report: dict[str, Any]) -> str:
    rows = [("what", "n", "median ms", "p95 ms", "mean ms", "max ms")]
    for p in report["pools"]:
        for key, what in (("serial", "round trip, warm"), ("judge_serial", "judge job, warm")):
            s = p[key]
            rows.append((f"pool[{p['backend']}] {what}", s["n"], s["median_ms"], s["p95_ms"], s["mean_ms"],
                         s["max_ms"]))
    for key, label in (("docker_run", "docker run --rm <image> python3 -c pass"),
                       ("subprocess", "/usr/bin/python3 -c pass (host, no isolation)")):
        if key in report:
            s = report[key]
            rows.append((label, s["n"], s["median_ms"], s["p95_ms"], s["mean_ms"], s["max_ms"]))
    widths = [max(len(_fmt(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(_fmt(v).ljust(w) if i == 0 else _fmt(v).rjust(w)
                       for i, (v, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append("")
    for p in report["pools"]:
        t = p["throughput"]
        lines.append(f"throughput pool[{p['backend']}]: {t['jobs_per_s']:.0f} jobs/s "
                     f"({t['jobs']} jobs, {t['concurrency']} in flight, pool of {p['pool_size']}, "
                     f"{t['seconds']:.2f} s); pool start {p['pool_start_s']:.2f} s")
    for backend, ratio in report.get("ratios", {}).items():
        lines.append(f"ratio docker-run / pool[{backend}] (median): {ratio:.0f}x")
    if "against" in report:
        a = report["against"]
        lines.append(f"this checkout vs {a['against']} ({a['rounds']} rounds, both at once, a pool of 1 each, "
                     "serial jobs):")
        for backend, trees in a["backends"].items():
            for job in ("run", "judge"):
                this, other = trees["this"][job], trees["against"][job]
                lines.append(f"  pool[{backend}] {job:5s} median {this['median_ms']:.2f} ms vs "
                             f"{other['median_ms']:.2f} ms ({this['median_ms'] / other['median_ms']:.2f}x), "
                             f"p95 {this['p95_ms']:.2f} vs {other['p95_ms']:.2f} ms, n={this['n']}")
    load = report["host"]["load"]
    lines.append(f"host: {report['host']['cpus']} CPUs, python {report['host']['python']}, image {report['image']}, "
                 f"load average {load['before'][0]:.2f} before, {load['after'][0]:.2f} after")
    return "\n".join(lines)


def _fmt(v: object) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--n-pool", type=int, default=300, help="serial pool round trips per backend (default 300)")
    ap.add_argument("--n-docker", type=int, default=20, help="`docker run --rm` runs (default 20)")
    ap.add_argument("--n-subprocess", type=int, default=100, help="host python3 subprocess runs (default 100)")
    ap.add_argument("--throughput-jobs", type=int, default=600, help="jobs in the throughput run (default 600)")
    ap.add_argument("--concurrency", type=int, default=os.cpu_count() or 1, help="jobs in flight (default: CPUs)")
    ap.add_argument("--backends", default="docker,bubblewrap", help="pool backends to try (default: both)")
    ap.add_argument("--against", type=Path, help="another rewardbox checkout to compare the pool's round trips with")
    ap.add_argument("--rounds", type=int, default=4, help="rounds with --against (default 4)")
    args = ap.parse_args(argv)

    available = {"docker": docker_available, "bubblewrap": bubblewrap_available}
    backends = [b for b in args.backends.split(",") if b and available.get(b, lambda: False)()]
    report: dict[str, Any] = {"image": image_name(), "pools": [],
                              "host": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                       "load": {"before": os.getloadavg()}}}
    for backend in backends:
        report["pools"].append(asyncio.run(bench_pool(backend, args.n_pool, args.throughput_jobs, args.concurrency)))
    if docker_available() and args.n_docker > 0:
        report["docker_run"] = bench_command(["docker", "run", "--rm", image_name(), "python3", "-c", "pass"],
                                             args.n_docker)
    if args.n_subprocess > 0:
        report["subprocess"] = bench_command(["/usr/bin/python3", "-c", "pass"], args.n_subprocess, warmup=3)
    if args.against:
        report["against"] = bench_against(args.against.resolve(), backends, args.n_pool, args.rounds)
    report["host"]["load"]["after"] = os.getloadavg()
    if "docker_run" in report:
        report["ratios"] = {p["backend"]: report["docker_run"]["median_ms"] / p["serial"]["median_ms"]
                            for p in report["pools"]}
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
