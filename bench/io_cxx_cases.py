"""Benchmark: the per-case cost of a compiled (C++) io item's cases job against running the same binary on the host.

    .venv/bin/python bench/io_cxx_cases.py                          # docker, 200 small + 40 large cases, 3 rounds
    .venv/bin/python bench/io_cxx_cases.py --backend bubblewrap --against /tmp/base   # + another checkout, same run

Compiles one C++ program on the host (g++ -O2 -static: the same binary runs on the host and in the sandbox), then
for a batch of small cases (10 numbers: the per-case overhead dominates) and one of large cases (150,000 numbers)
sends the binary and every stdin as one CasesJob (the shape graders/io_cases.py sends once the build is cached)
through a warm SandboxPool, and runs the same binary with the same inputs on the host:
  sandbox job   the job's wall over the pool, per case
  case wall     each case's wall as the runner measured it (spawn to exit), mean
  case cpu      each case's CPU from the kernel (wait4 of the case process: the lock-down before the exec counts),
                mean
  host run      subprocess.run([binary], input=...) per case: wall, and the child's CPU (RUSAGE_CHILDREN)
  host spawn    os.posix_spawn of the binary, stdin from a file, per case (no Python launcher cost): wall, CPU
--against runs the same jobs through another checkout's sandboxes package (its runner files are what the sandbox
mounts) in alternation with this one, so before/after share the run's load. Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CPP = """#include <cstdio>
int main() {
  long long n, s = 0, x;
  if (scanf("%lld", &n) != 1) return 0;
  for (long long i = 0; i < n; i++) { if (scanf("%lld", &x) != 1) break; s += x; }
  printf("%lld\\n", s);
}
"""

WORKER = r"""
import asyncio, base64, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from sandboxes import CasesJob, Limits, SandboxPool, choose_backend
import sandboxes
assert sandboxes.__file__.startswith(sys.argv[1]), sandboxes.__file__
binary, backend, stdins_path, rounds = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
batches = json.load(open(stdins_path))
files = {"main": {"b64": base64.b64encode(open(binary, "rb").read()).decode(), "exec": True}}

async def main():
    pool = SandboxPool(choose_backend(backend), size=1, acquire_timeout_s=120)
    await pool.start()
    out = {}
    try:
        for kind, stdins in batches.items():
            job = CasesJob(program={"argv": ["./main"]}, files=files, stdins=stdins,
                           limits=Limits(wall_s=5, cpu_s=5, total_s=300, memory_mb=256, output_bytes=1 << 16))
            await pool.run(job)  # warm
            rows = []
            for _ in range(rounds):
                t = time.perf_counter()
                r = await pool.run(job)
                wall = (time.perf_counter() - t) * 1000 / len(stdins)
                bad = [c["status"] for c in r.cases if c["status"] != "ok"]
                if bad or len(r.cases) != len(stdins):
                    raise SystemExit(f"cases failed: {bad[:3]} ({len(r.cases)} of {len(stdins)} ran)")
                rows.append({"job_ms": wall, "case_wall_ms": statistics.mean(c["wall_ms"] for c in r.cases),
                             "case_cpu_ms": statistics.mean(c["cpu_ms"] for c in r.cases)})
            out[kind] = rows
    finally:
        await pool.close()
    print(json.dumps(out))

asyncio.run(main())
"""


def numbers(rng: random.Random, n: int) -> str:
    return f"{n}\n" + " ".join(str(rng.randint(-10**9, 10**9)) for _ in range(n)) + "\n"


def host_runs(binary: str, stdins: list[str], tmp: str) -> dict[str, float]:
    """Per case on the host: subprocess.run, and posix_spawn with stdin from a file (wall and child CPU, ms)."""
    def cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (ru.ru_utime + ru.ru_stime) * 1000.0

    c0, t0 = cpu(), time.perf_counter()
    for s in stdins:
        subprocess.run([binary], input=s.encode(), capture_output=True, check=True)
    run_wall, run_cpu = (time.perf_counter() - t0) * 1000 / len(stdins), (cpu() - c0) / len(stdins)
    paths = []
    for i, s in enumerate(stdins):
        paths.append(os.path.join(tmp, f"in{i}"))
        Path(paths[-1]).write_text(s)
    devnull = os.open(os.devnull, os.O_WRONLY)
    c0, t0 = cpu(), time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        pid = os.posix_spawn(binary, [binary], {}, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0),
                                                                 (os.POSIX_SPAWN_DUP2, devnull, 1)])
        os.close(fd)
        os.waitpid(pid, 0)
    spawn_wall, spawn_cpu = (time.perf_counter() - t0) * 1000 / len(stdins), (cpu() - c0) / len(stdins)
    os.close(devnull)
    return {"run_wall": run_wall, "run_cpu": run_cpu, "spawn_wall": spawn_wall, "spawn_cpu": spawn_cpu}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="docker", choices=["docker", "bubblewrap"])
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--large", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", help="another checkout (e.g. /tmp/base): the same jobs through its runner")
    args = ap.parse_args(argv)
    gxx = shutil.which("g++")
    if gxx is None:
        print("no g++ on the host")
        return 1
    rng = random.Random(25)
    batches = {"small": [numbers(rng, 10) for _ in range(args.small)],
               "large": [numbers(rng, 150_000) for _ in range(args.large)]}
    trees = [("this", ROOT)] + ([("against", Path(args.against).resolve())] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="rewardbox-bench-") as tmp:
        binary = os.path.join(tmp, "main")
        Path(tmp, "main.cpp").write_text(CPP)
        subprocess.run([gxx, "-O2", "-static", "-o", binary, os.path.join(tmp, "main.cpp")], check=True)
        stdins_path = os.path.join(tmp, "stdins.json")
        Path(stdins_path).write_text(json.dumps(batches))
        print(f"backend {args.backend}; {args.small} small cases (10 numbers), {args.large} large (150,000 numbers,"
              f" {len(batches['large'][0]) / 1e6:.1f} MB); 1-min load {os.getloadavg()[0]:.2f}")
        results: dict[str, dict[str, list]] = {name: {"small": [], "large": []} for name, _ in trees}
        host: dict[str, list] = {"small": [], "large": []}
        for _ in range(args.rounds):  # alternate: the trees and the host share each round's load
            for name, tree in trees:
                out = subprocess.run([sys.executable, "-c", WORKER, str(tree), binary, args.backend, stdins_path, "1"],
                                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
                if out.returncode != 0:
                    print(f"{name}: failed: {out.stderr[-2000:]}")
                    return 1
                for kind, rows in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    results[name][kind] += rows
            for kind, stdins in batches.items():
                host[kind].append(host_runs(binary, stdins, tmp))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(f"{'ms per case (median of rounds)':<28} {'sandbox job':>11} {'case wall':>9} {'case cpu':>8}"
          f" {'host run wall/cpu':>17} {'host spawn wall/cpu':>19} {'job/host run':>12}")
    for kind in ("small", "large"):
        h = host[kind]
        for name, _ in trees:
            rows = results[name][kind]
            print(f"{kind + ' (' + name + ')':<28} {med(rows, 'job_ms'):>11.2f} {med(rows, 'case_wall_ms'):>9.2f}"
                  f" {med(rows, 'case_cpu_ms'):>8.2f} {med(h, 'run_wall'):>8.2f}/{med(h, 'run_cpu'):<8.2f}"
                  f" {med(h, 'spawn_wall'):>9.2f}/{med(h, 'spawn_cpu'):<9.2f}"
                  f" {med(rows, 'job_ms') / med(h, 'run_wall'):>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
