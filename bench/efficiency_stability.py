"""Benchmark: how stable the efficiency signals are, idle and next to a CPU hog, and what each grader costs.

    .venv/bin/python bench/efficiency_stability.py [--backend docker] [--repeats 15] [--json]

Measured in the same run:
  stability   the same item (a candidate doing twice the reference's work, so its score sits in the graded range)
              scored --repeats times, idle and then with a CPU hog (`python -c "while True: pass"`) on the host:
              coefficient of variation of the candidate's wall time, CPU time and peak memory (its graded run),
              of the time ratio (two lowest runs each, interleaved), of the median per-round ratio as an alternative,
              of the ratio the old way (candidate and reference each run once, in separate jobs) and of the final score.
  cost        quality: warm lint of distinct HumanEval programs (cache cold for each, linter warm), ms per rollout;
              efficiency: the efficiency stage's time over the program's own test run (tests stage), on HumanEval
              problems (reference = the canonical solution) and on the stability item.
Prints numbers; it is not a test. The machine may be shared: the idle rows are the same-run baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graders.quality import LINT_LIMITS, QualityGrader  # noqa: E402
from graders.tests import job_limits, run_tests  # noqa: E402
from sandboxes import LintJob, SandboxPool, choose_backend  # noqa: E402
from service.benchmark import humaneval_problems, humaneval_tests  # noqa: E402
from service.config import Settings  # noqa: E402
from service.models import RewardItem  # noqa: E402
from service.scoring import Scorer  # noqa: E402

SLOW = "def _slow(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
REFERENCE = SLOW + "def total(n):\n    return _slow(n)\n"
TWICE = SLOW + "def total(n):\n    _slow(n)\n    return _slow(n)\n"
N = 300_000
TESTS = {"kind": "assert", "entry_point": "total",
         "test_code": f"def check(candidate):\n    assert candidate(10) == 285\n"
                      f"    assert candidate({N}) == {(N - 1) * N * (2 * N - 1) // 6}\n"}


def cv(values: list[float]) -> float:
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean else 0.0


async def stability(scorer: Scorer, repeats: int) -> dict[str, Any]:
    item = RewardItem.model_validate({"code": TWICE, "reference_code": REFERENCE, "tests": TESTS,
                                      "weights": {"quality": 0}})
    limits = job_limits(10, 512, 120)
    rows: dict[str, list[float]] = {k: [] for k in ("wall_ms", "cpu_ms", "peak_kb", "ratio", "median_round_ratio",
                                                    "separate_ratio", "score", "rounds", "cost_x")}
    nulls: list[str] = []
    for _ in range(repeats):
        res = await scorer.score(item)
        if res.components.get("efficiency") is None:  # e.g. a drift of the reference: counted, never averaged in
            nulls.append(res.details.get("efficiency", {}).get("reason") or res.message)
            continue
        e = res.details["efficiency"]["inputs"]
        rows["wall_ms"].append(res.execution.wall_ms)
        rows["cpu_ms"].append(res.execution.cpu_ms)
        rows["peak_kb"].append(res.execution.peak_memory_kb)
        rows["ratio"].append(e["time_ratio"])
        rows["median_round_ratio"].append(e["median_round_ratio"])
        rows["score"].append(res.components["efficiency"])
        rows["rounds"].append(e["rounds"])
        t = res.details["timings"]
        rows["cost_x"].append(t["efficiency_ms"] / t["tests_ms"])
        cand, ref = await asyncio.gather(run_tests(scorer.pool, TWICE, item.tests, limits),
                                         run_tests(scorer.pool, REFERENCE, item.tests, limits))
        rows["separate_ratio"].append(cand.cpu_ms / ref.cpu_ms)  # the way efficiency was measured before
    out = {f"cv_{k}": cv(v) for k, v in rows.items() if k not in ("rounds", "cost_x")}
    out.update(score_min=min(rows["score"]), score_max=max(rows["score"]), score_spread=max(rows["score"]) -
               min(rows["score"]), ratio_median=statistics.median(rows["ratio"]),
               rounds_mean=statistics.fmean(rows["rounds"]), efficiency_cost_x=statistics.median(rows["cost_x"]),
               cpu_ms_median=statistics.median(rows["cpu_ms"]), nulls=len(nulls), null_reasons=nulls)
    return out


async def quality_cost(pool: SandboxPool, n: int) -> dict[str, float]:
    grader = QualityGrader(pool)
    problems = list(humaneval_problems().values())
    await grader.grade("def warm():\n    return 1\n")
    cold = []
    for p in problems[:n]:
        t = time.perf_counter()
        await grader.grade(p["prompt"] + p["canonical_solution"])
        cold.append((time.perf_counter() - t) * 1000)
    cached = []
    for p in problems[:n]:
        t = time.perf_counter()
        await grader.grade(p["prompt"] + p["canonical_solution"])
        cached.append((time.perf_counter() - t) * 1000)
    cpu = []  # the lint job's own CPU time (kernel accounting): what the wall time is made of on an idle machine
    for p in problems[n : 2 * n]:
        res = await pool.run(LintJob(code=p["prompt"] + p["canonical_solution"], limits=LINT_LIMITS))
        cpu.append(res.cpu_ms)
    return {"quality_cpu_ms_median": statistics.median(cpu), "quality_ms_median": statistics.median(cold),
            "quality_ms_p95": sorted(cold)[int(0.95 * len(cold)) - 1],
            "quality_cached_ms_median": statistics.median(cached)}


async def humaneval_efficiency_cost(scorer: Scorer, n: int) -> dict[str, float]:
    ratios, eff_ms, tests_ms, scores = [], [], [], []
    for p in list(humaneval_problems().values())[:n]:
        code = p["prompt"] + p["canonical_solution"]
        res = await scorer.score(RewardItem.model_validate({"code": code, "reference_code": code,
                                                            "tests": humaneval_tests(p), "weights": {"quality": 0}}))
        t = res.details.get("timings", {})
        if "efficiency_ms" in t:
            ratios.append(t["efficiency_ms"] / t["tests_ms"])
            eff_ms.append(t["efficiency_ms"])
            tests_ms.append(t["tests_ms"])
            scores.append(res.components["efficiency"])
    return {"humaneval_efficiency_cost_x": statistics.median(ratios),
            "humaneval_efficiency_ms_median": statistics.median(eff_ms),
            "humaneval_tests_ms_median": statistics.median(tests_ms),
            "humaneval_score_min": min(s for s in scores if s is not None),
            "humaneval_nulls": sum(s is None for s in scores)}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="docker")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    async with SandboxPool(choose_backend(a.backend), size=2, acquire_timeout_s=120) as pool:
        scorer = Scorer(pool, Settings())
        await stability(scorer, 2)  # warm-up: calibrates the reference like any service that has seen the item
        report: dict[str, Any] = {"backend": a.backend, "repeats": a.repeats}
        report["idle"] = await stability(scorer, a.repeats)
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            report["cpu_hog"] = await stability(scorer, a.repeats)
        finally:
            hog.kill()
            hog.wait()
        report.update(await quality_cost(pool, 40))
        report.update(await humaneval_efficiency_cost(scorer, 30))
    if a.json:
        print(json.dumps(report, indent=2))
        return
    print(f"backend {a.backend}, {a.repeats} repeats per condition, pool of 2 sandboxes")
    print("| signal | CV idle | CV with CPU hog |\n| --- | --- | --- |")
    for key, label in (("wall_ms", "wall time of the candidate's test run"), ("cpu_ms", "its CPU time"),
                       ("peak_kb", "its peak memory"), ("separate_ratio", "CPU ratio, separate jobs (old way)"),
                       ("median_round_ratio", "median per-round CPU ratio, interleaved (alternative)"),
                       ("ratio", "time ratio used: two-lowest means, interleaved, same job"),
                       ("score", "final efficiency score")):
        print(f"| {label} | {report['idle']['cv_' + key]:.2%} | {report['cpu_hog']['cv_' + key]:.2%} |")
    for cond in ("idle", "cpu_hog"):
        r = report[cond]
        print(f"{cond}: score {r['score_min']:.3f}..{r['score_max']:.3f} (spread {r['score_spread']:.3f}), "
              f"ratio median {r['ratio_median']:.3f}, rounds {r['rounds_mean']:.1f}, efficiency stage "
              f"{r['efficiency_cost_x']:.1f}x the tests stage (candidate CPU {r['cpu_ms_median']:.1f} ms), "
              f"null {r['nulls']}/{report['repeats']}{' ' + repr(r['null_reasons'][:2]) if r['nulls'] else ''}")
    print(f"quality per rollout (warm linter, cache cold): median {report['quality_ms_median']:.1f} ms, "
          f"p95 {report['quality_ms_p95']:.1f} ms, the lint job's own CPU {report['quality_cpu_ms_median']:.1f} ms; "
          f"cached {report['quality_cached_ms_median']:.2f} ms")
    print(f"efficiency on 30 HumanEval problems (reference = canonical): median "
          f"{report['humaneval_efficiency_ms_median']:.1f} ms = {report['humaneval_efficiency_cost_x']:.1f}x the "
          f"tests stage ({report['humaneval_tests_ms_median']:.1f} ms); lowest score "
          f"{report['humaneval_score_min']:.3f} (candidate = reference), null {report['humaneval_nulls']}")


if __name__ == "__main__":
    asyncio.run(main())
