"""Benchmark: what linting each Python program in a fork of the warm linter costs, against the persistent linter it
replaced, on HumanEval, in the sandbox.

    .venv/bin/python bench/lint_agreement.py [--backend docker] [--n 164]

One run job inside a real sandbox (the image's pylint, the sandbox's own lint.py and lint_server.py) lints every
HumanEval canonical solution three ways, in one process warmed up once: in a fork per program (lint_server.py's
lint_in_fork, how Python lint jobs run now), one after another in the warm process itself with astroid's
program caches dropped between programs (how they ran before issue 27: a program's writes into warm modules then
reached the next programs), then in a fork again (drift). Prints how many results are identical and the CPU and
wall time per program of each way (a fork's CPU: its child's from wait4 plus the parent's own; the in-process
lint's from process_time). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandboxes import Limits, RunJob, SandboxPool, choose_backend  # noqa: E402
from service.benchmark import humaneval_problems  # noqa: E402

IN_SANDBOX = r'''
import json, os, statistics, sys, time
sys.path.insert(0, "/opt/rewardbox")
import lint, lint_server
lint.warm_up()
import astroid.context
from astroid import MANAGER
keep = set(MANAGER.astroid_cache)
programs = json.load(open("programs.json"))
path = os.path.join(os.getcwd(), "solution.py")


def forked():
    results, cpu, wall = [], [], []
    for code, roots in programs:
        t, w = time.process_time(), time.perf_counter()
        got = lint_server.lint_in_fork(code, path, roots)
        cpu.append((time.process_time() - t) * 1000 + got.pop("child_cpu_ms"))
        wall.append((time.perf_counter() - w) * 1000)
        results.append(got)
    return results, cpu, wall


def persistent():  # the pre-issue-27 server: lint in place, then forget the program's modules and inferences
    results, cpu, wall = [], [], []
    for code, roots in programs:
        t, w = time.process_time(), time.perf_counter()
        got = json.loads(json.dumps(lint.lint(code, path, roots)))
        for name in [n for n in MANAGER.astroid_cache if n not in keep]:
            del MANAGER.astroid_cache[name]
        astroid.context._INFERENCE_CACHE.clear()
        cpu.append((time.process_time() - t) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
        results.append(got)
    return results, cpu, wall


fork1, per, fork2 = forked(), persistent(), forked()
p50 = statistics.median
print(json.dumps({"programs": len(programs), "identical": sum(a == b for a, b in zip(fork1[0], per[0])),
                  "identical_forks": sum(a == b for a, b in zip(fork1[0], fork2[0])),
                  "fork_cpu_ms_p50": p50(fork1[1] + fork2[1]), "fork_wall_ms_p50": p50(fork1[2] + fork2[2]),
                  "server_cpu_ms_p50": p50(per[1]), "server_wall_ms_p50": p50(per[2])}))
'''


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="docker")
    ap.add_argument("--n", type=int, default=164)
    a = ap.parse_args()
    programs = [[p["prompt"] + p["canonical_solution"], [p["entry_point"]]]
                for p in list(humaneval_problems().values())[: a.n]]
    async with SandboxPool(choose_backend(a.backend), size=1, acquire_timeout_s=120) as pool:
        result = await pool.run(RunJob(program={"code": IN_SANDBOX}, files={"programs.json": json.dumps(programs)},
                                       limits=Limits(wall_s=300, total_s=300, cpu_s=300, memory_mb=2048)))
    if result.status != "ok":
        print(f"the run job ended {result.status}: {result.error or ''}\n{result.stderr[-2000:]}")
        sys.exit(1)
    r = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"backend {a.backend}: {r['programs']} HumanEval programs; fork per program == persistent:"
          f" {r['identical']}; fork == fork: {r['identical_forks']}")
    print(f"  per program, p50: fork per program {r['fork_cpu_ms_p50']:.1f} ms CPU, {r['fork_wall_ms_p50']:.1f} ms"
          f" wall; persistent (before) {r['server_cpu_ms_p50']:.1f} ms CPU, {r['server_wall_ms_p50']:.1f} ms wall")


if __name__ == "__main__":
    asyncio.run(main())
