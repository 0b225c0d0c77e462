"""Benchmark: efficiency without a reference, read from the tests stage against a measuring job of its own.

    .venv/bin/python bench/efficiency_agreement.py [--backend docker] [--n 164] [--json]

For each item (HumanEval's canonical solutions, then the graded workloads of tests/test_efficiency.py, scored
without their reference) the same program is scored both ways in the same run, one right after the other:
  tests stage     the default since issue 16: the runner's accounting of the job that ran the tests (CPU time and
                  peak memory, orphans and tmpfs files included), against the limits
  measuring job   the previous way: a second job (candidate once, no-op once) measured against the limits
Prints the score of each, the difference, and the time the efficiency stage adds. With a reference (the graded
workloads against their reference, HumanEval against its canonical solution), each item is scored once and both
time estimates are taken from that one measurement's runs:
  two lowest      the default since the stability fix: each program's cost is the mean of its two lowest runs
  lowest          the previous estimate: each program's single lowest run
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graders.efficiency import combine, ratio_score  # noqa: E402
from graders.tests import job_limits  # noqa: E402
from sandboxes import SandboxPool, choose_backend  # noqa: E402
from service.benchmark import humaneval_problems, humaneval_tests  # noqa: E402
from service.config import Settings  # noqa: E402
from service.models import RewardItem  # noqa: E402
from service.scoring import Scorer  # noqa: E402
from tests.test_efficiency import (  # noqa: E402
    AT_IMPORT,
    BIG_TESTS,
    CLOSED_FORM,
    IN_CHILD,
    IN_THREAD,
    MEMORY_HUNGRY,
    ON_DISK,
    REFERENCE,
    TOTAL_TESTS,
    TWICE,
)

MEMORY_FILE = ("for k in range(3):\n    with open(f'/tmp/blob{k}', 'wb') as f:\n        for _ in range(12):\n"
               "            f.write(b'x' * (1 << 20))\n"
               + CLOSED_FORM)
WITH_REFERENCE = {"equal cost": (REFERENCE, REFERENCE, TOTAL_TESTS), "twice the work": (TWICE, REFERENCE, TOTAL_TESTS),
                  "closed form": (CLOSED_FORM, REFERENCE, TOTAL_TESTS),
                  "memory hungry": (MEMORY_HUNGRY, REFERENCE, TOTAL_TESTS),
                  "big loop vs closed form": (REFERENCE, CLOSED_FORM, BIG_TESTS),
                  "big loop at import vs closed form": (AT_IMPORT, CLOSED_FORM, BIG_TESTS)}
GRADED = {"linear loop": (REFERENCE, TOTAL_TESTS), "twice the work": (TWICE, TOTAL_TESTS),
          "closed form": (CLOSED_FORM, TOTAL_TESTS), "memory hungry": (MEMORY_HUNGRY, TOTAL_TESTS),
          "36 MiB in /tmp files": (MEMORY_FILE, TOTAL_TESTS), "big loop": (REFERENCE, BIG_TESTS),
          "big loop at import": (AT_IMPORT, BIG_TESTS), "big loop in a thread": (IN_THREAD, BIG_TESTS),
          "big loop in a forked child": (IN_CHILD, BIG_TESTS), "cache on disk": (ON_DISK, BIG_TESTS)}


async def both_ways(scorer: Scorer, name: str, code: str, tests: dict) -> dict[str, Any]:
    item = RewardItem.model_validate({"code": code, "tests": tests, "weights": {"quality": 0}})
    res = await scorer.score(item)
    limits = job_limits(item.limits.timeout_s, item.limits.memory_mb, scorer.settings.max_item_s)
    t = time.perf_counter()
    old = await scorer.efficiency.grade(code, None, item.tests, limits, item.limits.timeout_s, item.limits.memory_mb)
    old_ms = (time.perf_counter() - t) * 1000
    eff = res.details.get("efficiency") or {}
    timings = res.details.get("timings") or {}
    return {"name": name, "status": res.status, "new": res.components.get("efficiency"), "old": old.score,
            "new_cpu_ms": eff.get("inputs", {}).get("cpu_ms"), "old_cpu_ms": old.inputs.get("cpu_ms"),
            "new_extra_kb": eff.get("inputs", {}).get("extra_memory_kb"),
            "old_extra_kb": old.inputs.get("extra_memory_kb"),
            "new_ms": timings.get("efficiency_ms"), "old_ms": round(old_ms, 2), "tests_ms": timings.get("tests_ms"),
            "reason": eff.get("reason") or old.reason}


async def with_reference(scorer: Scorer, name: str, code: str, reference: str, tests: dict) -> dict[str, Any]:
    res = await scorer.score(RewardItem.model_validate({"code": code, "reference_code": reference, "tests": tests,
                                                        "weights": {"quality": 0}}))
    eff = res.details.get("efficiency") or {}
    e = eff.get("inputs") or {}
    if res.components.get("efficiency") is None or "cpu_ms" not in e:
        return {"name": name, "new": None, "old": None, "rounds": None, "reason": eff.get("reason") or res.message}
    lowest = min(e["cpu_ms"]) / max(min(e["reference_cpu_ms"]), 0.1)
    old = combine(ratio_score(lowest), eff["memory_score"], eff["complexity_factor"] or 1.0)
    return {"name": name, "new": res.components["efficiency"], "old": old, "rounds": e.get("rounds"),
            "new_ratio": e["time_ratio"], "old_ratio": round(lowest, 4),
            "cost_x": round(res.details["timings"]["efficiency_ms"] / res.details["timings"]["tests_ms"], 2)}


def summary(rows: list[dict]) -> dict[str, Any]:
    pairs = [(r["new"], r["old"]) for r in rows if r["new"] is not None and r["old"] is not None]
    diffs = [abs(a - b) for a, b in pairs]
    return {"items": len(rows), "both_scored": len(pairs),
            "null_new": sum(r["new"] is None for r in rows), "null_old": sum(r["old"] is None for r in rows),
            "max_abs_diff": round(max(diffs), 4) if diffs else None,
            "over_0.01": sum(d > 0.01 for d in diffs),
            "new_eff_ms_median": statistics.median(r["new_ms"] for r in rows if r["new_ms"] is not None),
            "old_eff_ms_median": statistics.median(r["old_ms"] for r in rows),
            "tests_ms_median": statistics.median(r["tests_ms"] for r in rows if r["tests_ms"] is not None)}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="docker")
    ap.add_argument("--n", type=int, default=164, help="HumanEval problems")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    async with SandboxPool(choose_backend(a.backend), size=2, acquire_timeout_s=120) as pool:
        scorer = Scorer(pool, Settings())
        problems = list(humaneval_problems().values())[: a.n]
        humaneval = [await both_ways(scorer, p["task_id"], p["prompt"] + p["canonical_solution"],
                                     humaneval_tests(p)) for p in problems]
        graded = [await both_ways(scorer, name, code, tests) for name, (code, tests) in GRADED.items()]
        referenced = [await with_reference(scorer, name, code, ref, tests)
                      for name, (code, ref, tests) in WITH_REFERENCE.items()]
        referenced_humaneval = [await with_reference(scorer, p["task_id"], p["prompt"] + p["canonical_solution"],
                                                     p["prompt"] + p["canonical_solution"], humaneval_tests(p))
                                for p in problems]
    report = {"backend": a.backend, "humaneval": summary(humaneval), "graded": graded,
              "humaneval_rows": humaneval, "with_reference": referenced,
              "with_reference_humaneval": referenced_humaneval}
    if a.json:
        print(json.dumps(report, indent=2))
        return
    s = report["humaneval"]
    print(f"backend {a.backend}; HumanEval-{s['items']} canonical solutions, no reference:"
          f" both scored {s['both_scored']}, null tests-stage {s['null_new']} / measuring-job {s['null_old']},"
          f" max |diff| {s['max_abs_diff']},"
          f" items differing by > 0.01: {s['over_0.01']}")
    print(f"  efficiency stage median: tests stage {s['new_eff_ms_median']:.1f} ms, measuring job"
          f" {s['old_eff_ms_median']:.1f} ms (tests stage itself {s['tests_ms_median']:.1f} ms)")
    for r in humaneval:
        if r["new"] is None or r["old"] is None or abs(r["new"] - r["old"]) > 0.01:
            print(f"  differs: {r['name']}: {r['new']} vs {r['old']} ({r['reason']})")
    print()
    print("| graded item (no reference) | tests stage | measuring job | CPU ms (stage / job)"
          " | extra KiB (stage / job) |")
    print("| --- | --- | --- | --- | --- |")
    for r in graded:
        print(f"| {r['name']} | {r['new']} | {r['old']} | {r['new_cpu_ms']} / {r['old_cpu_ms']} |"
              f" {r['new_extra_kb']} / {r['old_extra_kb']} |")

    print()
    print("| with a reference | two lowest | lowest | time ratio (two lowest / lowest) | rounds | cost x tests stage |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in referenced:
        if r["new"] is None:
            print(f"| {r['name']} | null | null | {r['reason']} | | |")
            continue
        print(f"| {r['name']} | {r['new']:.4f} | {r['old']:.4f} | {r['new_ratio']} / {r['old_ratio']} | {r['rounds']} |"
              f" {r['cost_x']} |")
    scored = [r for r in referenced_humaneval if r["new"] is not None]
    diffs = [abs(r["new"] - r["old"]) for r in scored]
    print(f"HumanEval-{len(referenced_humaneval)} against the canonical solution: scored {len(scored)},"
          f" max |two lowest - lowest| {max(diffs) if diffs else None},"
          f" rounds {statistics.fmean(r['rounds'] for r in scored):.2f},"
          f" cost median {statistics.median(r['cost_x'] for r in scored):.2f}x the tests stage")


if __name__ == "__main__":
    asyncio.run(main())
