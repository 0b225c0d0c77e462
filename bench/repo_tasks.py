"""Benchmark: repo tasks graded GRPO-style, rewardbox against the naive host way, in the same run.

    .venv/bin/python bench/repo_tasks.py                 # starts `rewardbox serve` (pool of 2, result cache off)
    .venv/bin/python bench/repo_tasks.py --rounds 3 --json

The tasks are service/repos/benchmark.py's (real PyPI sdists with one injected bug each). Every task gets a group of
8 patches, as a GRPO step would sample them: the gold patch twice, the gold patch plus an unrelated comment, the
empty patch, a comment-only patch, a patch that does not apply, a patch with a syntax error, and a planted
conftest.py that forces every test to pass (a reward hack).
- rewardbox: the whole group of every task in one POST /reward/batch over real HTTP (snapshots uploaded once with
  POST /repos before the first round; the first batch also warms the sandboxes).
- naive: the same patches graded the way a local harness does it: a fresh copy of the unpacked snapshot, GNU
  patch, the test files written, `python -m pytest <test files>` in a subprocess, no isolation at all; as many at
  once as the service has sandboxes.
Figures: wall time per round, items per second, per-item time (rewardbox: the sandbox's own time for the job and
the time the item spent in the service; naive: the subprocess's wall time), the verdicts each way, and, one item at
a time, each task's gold patch through /reward next to the suite's own run time (pytest's session, start to
finish, in the naive run). Targets: isolated grading no slower than the naive way; each item at most the suite's
own time + 30 ms. Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.humaneval import free_port, stop_server, wait_ready  # noqa: E402
from service.compat import swebench  # noqa: E402
from service.repos.benchmark import tasks  # noqa: E402
from tests.repo_hacks import HACKS, hack_patch, repo_diff  # noqa: E402

TARGET_EXTRA_MS = 30.0
SESSION_PLUGIN = '''
import json, os, time
OUT = {"outcomes": {}}
def pytest_sessionstart(session):
    OUT["start"], OUT["cpu_start"] = time.perf_counter(), time.process_time()
def pytest_runtest_logreport(report):
    if report.failed or report.skipped:
        OUT["outcomes"][report.nodeid] = "failed"
    elif report.when == "call":
        OUT["outcomes"].setdefault(report.nodeid, "passed")
def pytest_sessionfinish(session):
    OUT["session_ms"] = (time.perf_counter() - OUT["start"]) * 1000
    OUT["session_cpu_ms"] = (time.process_time() - OUT["cpu_start"]) * 1000
    with open(os.environ["RB_SESSION_OUT"], "w") as f:
        json.dump(OUT, f)
'''


def group_of(task: dict) -> list[tuple[str, str]]:
    """(label, patch): the 8 patches of one GRPO group."""
    files = swebench.archive_files(task["archive"])
    bug_path = task["bug"]["path"]
    source = files[bug_path]
    comment = repo_diff.unified_diff({bug_path: source}, {bug_path: source + b"\n# reviewed\n"})
    syntax = repo_diff.unified_diff({bug_path: source}, {bug_path: source + b"\ndef broken(:\n"})
    gold_lines = task["patch"]
    conftest = next(h for h in HACKS if h.name == "conftest_at_root")
    return [("gold", gold_lines), ("gold", gold_lines), ("gold+comment", gold_lines + comment), ("empty", ""),
            ("comment only", comment), ("does not apply", "--- a/nowhere.py\n+++ b/nowhere.py\n@@ -1 +1 @@\n-a\n+b\n"),
            ("syntax error", syntax), ("conftest hack", hack_patch(conftest, task))]


def passed_all(task: dict, outcomes: dict[str, str]) -> bool:
    listed = task["FAIL_TO_PASS"] + task["PASS_TO_PASS"]
    return all(outcomes.get(n) == "passed" for n in listed)


# ------------------------------------------------------------------------------------------------ naive


class Naive:
    """The host way: copy, patch, pytest subprocess. Snapshots are unpacked once, outside the timing."""

    def __init__(self, all_tasks: list[dict], work: Path) -> None:
        self.work = work
        self.roots = {}
        for task in all_tasks:
            root = work / "snapshots" / task["instance_id"]
            for path, data in swebench.archive_files(task["archive"]).items():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(data)
            self.roots[task["instance_id"]] = root
        (work / "plugin").mkdir()
        (work / "plugin" / "rb_session.py").write_text(SESSION_PLUGIN)

    def grade(self, task: dict, patch: str) -> dict:
        started = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=self.work))
        try:
            root = tmp / "repo"
            shutil.copytree(self.roots[task["instance_id"]], root)
            if patch.strip():
                applied = subprocess.run(["patch", "-p1", "--force", "--no-backup-if-mismatch", "--quiet"],
                                         input=patch.encode(), cwd=root, capture_output=True)
                if applied.returncode != 0:
                    return {"passed": False, "wall_ms": (time.perf_counter() - started) * 1000, "applied": False}
            for path, content in task["test_files"].items():
                (root / path).write_text(content)
            out = tmp / "session.json"
            env = {**os.environ, "PYTHONPATH": str(self.work / "plugin"), "RB_SESSION_OUT": str(out),
                   "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
            listed = list(dict.fromkeys(task["FAIL_TO_PASS"] + task["PASS_TO_PASS"]))  # the same tests as rewardbox
            proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "rb_session", "-p", "no:cacheprovider",
                                     *listed], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(proc.pid, 0)
            wall_ms = (time.perf_counter() - started) * 1000
            report = json.loads(out.read_text()) if out.exists() else {"outcomes": {}}
            return {"passed": passed_all(task, report["outcomes"]), "wall_ms": wall_ms, "applied": True,
                    "session_ms": report.get("session_ms"), "session_cpu_ms": report.get("session_cpu_ms"),
                    "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ figures


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def med(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def run(url: str, rounds: int, single: int) -> dict:
    all_tasks = tasks()
    groups = {t["instance_id"]: group_of(t) for t in all_tasks}
    out: dict = {"load_before": os.getloadavg(), "tasks": len(all_tasks), "items_per_round": 8 * len(all_tasks)}
    with httpx.Client(base_url=url, timeout=httpx.Timeout(900.0, connect=10.0)) as client, \
            tempfile.TemporaryDirectory(prefix="rewardbox-bench-") as work:
        info = client.get("/v1/info").json()
        out["pool_size"] = info["sandbox"]["pool_size"]
        out["backend"] = info["sandbox"]["backend"]
        t = time.perf_counter()
        repo_ids = {}
        for task in all_tasks:
            r = client.post("/repos", content=task["archive"], headers={"content-type": "application/gzip"})
            r.raise_for_status()
            repo_ids[task["instance_id"]] = r.json()["id"]
        out["upload_ms"] = round((time.perf_counter() - t) * 1000, 1)
        items = [{**swebench.to_item(task, repo_ids[task["instance_id"]], patch), "id": f"{task['instance_id']}/{i}"}
                 for task in all_tasks for i, (_, patch) in enumerate(groups[task["instance_id"]])]
        labels = [label for task in all_tasks for label, _ in groups[task["instance_id"]]]
        naive = Naive(all_tasks, Path(work))
        pairs = [(task, patch) for task in all_tasks for _, patch in groups[task["instance_id"]]]
        client.post("/reward/batch", json={"items": items}).raise_for_status()  # warm-up: snapshots, zygotes
        rows = []
        for rnd in range(rounds):
            t = time.perf_counter()
            results = client.post("/reward/batch", json={"items": items}).json()["results"]
            rb_wall = time.perf_counter() - t
            t = time.perf_counter()
            with ThreadPoolExecutor(out["pool_size"]) as ex:
                naive_results = list(ex.map(lambda p: naive.grade(*p), pairs))
            naive_wall = time.perf_counter() - t
            job_ms = [r["details"].get("repo", {}).get("timings", {}).get("total_ms") for r in results]
            in_service_ms = [r["details"].get("timings", {}).get("tests_ms") for r in results]
            rb_cpu = [r["execution"]["cpu_ms"] for r in results if r["execution"]["cpu_ms"]]
            naive_cpu = [x["cpu_ms"] for x in naive_results if x.get("cpu_ms")]
            rows.append({
                "round": rnd + 1, "rewardbox_wall_s": round(rb_wall, 2), "naive_wall_s": round(naive_wall, 2),
                "rewardbox_items_per_s": round(len(items) / rb_wall, 2),
                "naive_items_per_s": round(len(items) / naive_wall, 2),
                "rewardbox_job_ms_p50": med([x for x in job_ms if x]), "rewardbox_job_ms_p95": pct(
                    [x for x in job_ms if x], 0.95),
                "rewardbox_in_service_ms_p50": med([x for x in in_service_ms if x]),
                "rewardbox_in_service_ms_p95": pct([x for x in in_service_ms if x], 0.95),
                "naive_item_ms_p50": med([x["wall_ms"] for x in naive_results]),
                "naive_item_ms_p95": pct([x["wall_ms"] for x in naive_results], 0.95),
                "rewardbox_test_process_cpu_ms_p50": med(rb_cpu), "naive_pytest_process_cpu_ms_p50": med(naive_cpu),
                "verdicts": {label: {"rewardbox_passed": sum(1 for lb, r in zip(labels, results, strict=True)
                                                             if lb == label and r["status"] == "passed"),
                                     "naive_passed": sum(1 for lb, r in zip(labels, naive_results, strict=True)
                                                         if lb == label and r["passed"]),
                                     "of": labels.count(label)} for label in dict.fromkeys(labels)},
                "rewardbox_statuses": sorted({r["status"] for r in results}),
            })
        out["rounds"] = rows
        singles = []
        for task in all_tasks:  # one item at a time: the gold patch, warm
            gold = {**swebench.to_item(task, repo_ids[task["instance_id"]], task["patch"])}
            latency, suite, naive_wall, rb_cpu, suite_cpu = [], [], [], [], []
            for _ in range(single):
                t = time.perf_counter()
                res = client.post("/reward", json=gold).json()
                latency.append((time.perf_counter() - t) * 1000)
                assert res["status"] == "passed", res["message"]
                rb_cpu.append(res["execution"]["cpu_ms"])
                n = naive.grade(task, task["patch"])
                suite.append(n["session_ms"])
                suite_cpu.append(n["session_cpu_ms"])
                naive_wall.append(n["wall_ms"])
            singles.append({"task": task["instance_id"], "listed": len(task["FAIL_TO_PASS"] + task["PASS_TO_PASS"]),
                            "rewardbox_item_ms": med(latency), "suite_own_ms": med(suite),
                            "extra_ms": round(med(latency) - med(suite), 1), "naive_item_ms": med(naive_wall),
                            "rewardbox_test_process_cpu_ms": med(rb_cpu), "suite_own_cpu_ms": med(suite_cpu),
                            "target_met": med(latency) <= med(suite) + TARGET_EXTRA_MS})
        out["one_at_a_time"] = singles
    out["load_after"] = os.getloadavg()
    return out


def print_report(out: dict) -> None:
    print(f"repo tasks: {out['tasks']} tasks x 8 patches = {out['items_per_round']} items per round; "
          f"{out['backend']} backend, pool of {out['pool_size']}; snapshots uploaded once in {out['upload_ms']} ms; "
          f"load average {out['load_before'][0]:.1f} -> {out['load_after'][0]:.1f}")
    print("| round | rewardbox wall | naive wall | rewardbox items/s | naive items/s | rewardbox job p50/p95 ms | "
          "in service p50/p95 ms | naive item p50/p95 ms | test process CPU p50, rewardbox / naive |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in out["rounds"]:
        print(f"| {r['round']} | {r['rewardbox_wall_s']} s | {r['naive_wall_s']} s | {r['rewardbox_items_per_s']} | "
              f"{r['naive_items_per_s']} | {r['rewardbox_job_ms_p50']} / {r['rewardbox_job_ms_p95']} | "
              f"{r['rewardbox_in_service_ms_p50']} / {r['rewardbox_in_service_ms_p95']} | "
              f"{r['naive_item_ms_p50']} / {r['naive_item_ms_p95']} | "
              f"{r['rewardbox_test_process_cpu_ms_p50']} / {r['naive_pytest_process_cpu_ms_p50']} ms |")
    print("verdicts (items passed, last round): " + "; ".join(
        f"{label}: rewardbox {v['rewardbox_passed']}/{v['of']}, naive {v['naive_passed']}/{v['of']}"
        for label, v in out["rounds"][-1]["verdicts"].items()))
    print("| task (one item at a time, gold) | listed tests | rewardbox /reward | suite's own time | extra | "
          "naive item | <= suite + 30 ms | CPU: rewardbox test process / suite's own |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in out["one_at_a_time"]:
        print(f"| {s['task']} | {s['listed']} | {s['rewardbox_item_ms']} ms | {s['suite_own_ms']} ms | "
              f"{s['extra_ms']:+} ms | {s['naive_item_ms']} ms | {'yes' if s['target_met'] else 'no'} | "
              f"{s['rewardbox_test_process_cpu_ms']} / {s['suite_own_cpu_ms']} ms |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="an already running rewardbox (its result cache must be off)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--single", type=int, default=5, help="one-at-a-time repetitions per task")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    proc = None
    url = a.url
    if url is None:
        port = free_port()
        env = {**os.environ, "REWARDBOX_POOL_SIZE": os.environ.get("REWARDBOX_POOL_SIZE", "2"),
               "REWARDBOX_RESULT_CACHE_SIZE": "0", "REWARDBOX_DB": "off"}
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port",
                                 str(port), "--log-level", "warning"], env=env, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc, None, 180)
    try:
        out = run(url, a.rounds, a.single)
    finally:
        if proc is not None:
            stop_server(proc)
    print(json.dumps(out, indent=1) if a.json else "", end="")
    print_report(out)


if __name__ == "__main__":
    main()
