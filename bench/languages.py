"""Benchmark: per-language overhead on a trivial program (print "hello") through the warm sandbox pool.

    .venv/bin/python bench/languages.py [--backend docker|bubblewrap] [--compiles 5] [--runs 10] [--json]

Measured in the same run, per language:
  compile     a cold compile job (a fresh source each time, so the artefact cache misses), round trip
  cache hit   the same build again: the artefacts come from the host-side cache
  run         a run job of the compiled program (artefacts copied in), round trip; and the program's own wall time
  item cold / item warm   a whole one-case io item (compile + run) the first time and again (cache hit);
              speed-up = cold / warm
Baseline in the same run: Python's `print("hello")` run job through the same pool. Prints numbers; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graders.tests import job_limits, run_tests  # noqa: E402
from sandboxes import RunJob, SandboxPool, Status, choose_backend  # noqa: E402
from sandboxes.builds import Builder  # noqa: E402
from sandboxes.languages import EXEC_LANGUAGES  # noqa: E402
from service.models import IOTests  # noqa: E402
from tests.language_programs import HELLO  # noqa: E402

LIMITS = job_limits(timeout_s=10, memory_mb=512, max_item_s=60)
COMMENT = {"bash": "# {}\n", "python": "# {}\n", "ruby": "# {}\n", "perl": "# {}\n", "lua": "-- {}\n"}


def variant(language: str, code: str, tag: str) -> str:
    """The same program with a unique trailing comment: a different source hash, the same work."""
    return code + COMMENT.get(language, "// {}\n").format(tag)


def ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000.0, 1)


async def timed(coro):
    t0 = time.perf_counter()
    value = await coro
    return time.perf_counter() - t0, value


async def bench_language(pool: SandboxPool, builder: Builder, language: str, compiles: int, runs: int) -> dict:
    lang = EXEC_LANGUAGES[language]
    await builder.toolchain_version(lang)
    stamp = time.time_ns()
    cold, hit = [], []
    build = None
    for i in range(compiles):
        code = variant(language, HELLO[language], f"bench {stamp} {i}")
        dt, build = await timed(builder.build(lang, code, 60))
        assert build.ok, build.diagnostics
        cold.append(dt)
        dt, again = await timed(builder.build(lang, code, 60))
        assert again.cached
        hit.append(dt)
    run_rt, run_own = [], []
    for _ in range(runs):
        dt, result = await timed(pool.run(lang.run_job(code, build.files, "", LIMITS)))
        assert result.status == Status.OK and result.stdout == "hello\n", result
        run_rt.append(dt)
        run_own.append(result.wall_ms / 1000.0)
    tests = IOTests(kind="io", cases=[{"stdin": "", "stdout": "hello\n"}])
    item_cold, item_warm = [], []
    for i in range(compiles):
        code = variant(language, HELLO[language], f"item {stamp} {i}")
        dt, outcome = await timed(run_tests(pool, code, tests, LIMITS, language, builder, 60))
        assert outcome.status == "passed", outcome.message
        item_cold.append(dt)
        dt, outcome = await timed(run_tests(pool, code, tests, LIMITS, language, builder, 60))
        item_warm.append(dt)
    return {"language": language, "compile_ms": ms(cold), "cache_hit_ms": ms(hit), "run_ms": ms(run_rt),
            "program_wall_ms": ms(run_own), "item_cold_ms": ms(item_cold), "item_warm_ms": ms(item_warm),
            "speedup": round(statistics.median(item_cold) / statistics.median(item_warm), 1)}


async def python_baseline(pool: SandboxPool, runs: int) -> float:
    samples = []
    for _ in range(runs):
        dt, result = await timed(pool.run(RunJob(program={"code": 'print("hello")'}, limits=LIMITS)))
        assert result.status == Status.OK
        samples.append(dt)
    return ms(samples)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="docker")
    p.add_argument("--compiles", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    async with SandboxPool(choose_backend(a.backend), size=2, acquire_timeout_s=300) as pool:
        builder = Builder(pool)
        baseline = await python_baseline(pool, a.runs)
        rows = [await bench_language(pool, builder, lang, a.compiles, a.runs) for lang in EXEC_LANGUAGES]
    if a.json:
        print(json.dumps({"backend": a.backend, "python_run_ms": baseline, "languages": rows}, indent=2))
        return
    print(f"backend {a.backend}; baseline: Python print('hello') run job {baseline} ms (median of {a.runs})")
    print("| language | compile (cold) | cache hit | run job | program's own wall | item cold | item warm | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['language']} | {r['compile_ms']} ms | {r['cache_hit_ms']} ms | {r['run_ms']} ms | "
              f"{r['program_wall_ms']} ms | {r['item_cold_ms']} ms | {r['item_warm_ms']} ms | {r['speedup']}x |")


if __name__ == "__main__":
    asyncio.run(main())
