"""Benchmark: what the service spends per item of a 1,000-item /reward/batch outside the sandboxes.

    .venv/bin/python bench/batch_overhead.py [--items 1000] [--repeats 5]

In-process, no sandbox: the request body parsed, each item validated, checked and keyed (executor.checked), and
1,000 results encoded the way /reward/batch answers. Baseline in the same run: json.loads of the same body and
json.dumps of the same results (the least any JSON service does). Medians over --repeats. Not a test.
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

from service.benchmark import humaneval_problems, humaneval_tests  # noqa: E402
from service.cache import code_versions  # noqa: E402
from service.config import Settings  # noqa: E402
from service.executor import checked  # noqa: E402
from service.models import BatchRequest, BatchResult, ItemResult  # noqa: E402


def body_of(n: int) -> bytes:
    problems = list(humaneval_problems().values())
    items = [{"id": f"{p['task_id']}#{i}", "code": p["prompt"] + p["canonical_solution"] + f"\n# {i}\n",
              "tests": humaneval_tests(p)} for i, p in ((i, problems[i % len(problems)]) for i in range(n))]
    return json.dumps({"items": items}).encode()


def result_of(i: int) -> ItemResult:
    return ItemResult.model_validate({
        "id": f"HumanEval/{i}", "rollout_id": f"{i:032x}", "status": "passed", "reward": 0.98, "profile": "seed",
        "components": {"executability": 1.0, "pass_rate": 1.0, "quality": 0.9, "efficiency": 0.999},
        "tests": [{"name": f"assert candidate({k}) == {k}", "passed": True, "status": "passed", "cpu_ms": 0.1}
                  for k in range(8)],
        "details": {"timings": {"tests_ms": 20.0, "lint_ms": 18.0}, "quality": {"pylint_score": 9.0, "messages": []}}})


def timed(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    settings, versions = Settings(), code_versions()
    body = body_of(a.items)
    results = [result_of(i) for i in range(a.items)]
    plain = [r.model_dump(mode="json") for r in results]
    rows = {
        "json.loads of the body (baseline)": timed(lambda: json.loads(body), a.repeats),
        "BatchRequest from the body": timed(lambda: BatchRequest.model_validate_json(body), a.repeats),
        "every item validated, checked, keyed": timed(
            lambda: asyncio.run(checked(BatchRequest.model_validate_json(body).items, settings, versions)), a.repeats),
        "json.dumps of the results (baseline)": timed(lambda: json.dumps({"results": plain}), a.repeats),
        "BatchResult encoded (as /reward/batch)": timed(
            lambda: BatchResult(results=results).model_dump_json().encode(), a.repeats),
    }
    print(f"{a.items} HumanEval items ({len(body) / 1e6:.1f} MB body), median of {a.repeats}:")
    for name, ms in rows.items():
        print(f"  {name:<42} {ms:8.1f} ms  ({ms * 1000 / a.items:6.1f} us per item)")


if __name__ == "__main__":
    main()
