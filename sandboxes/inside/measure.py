"""Measuring job (op "measure"): several programs run the same workloads alternately, in this one sandbox.

Efficiency compares a candidate with a reference. Measured in separate sandboxes (or minutes apart) a uniform
slowdown of the machine shows up in one and not the other; run in alternating rounds here it hits both, and the
host compares each program's least disturbed runs. Each run is a whole job of its own (a judge job, or one process
per io case), followed by the usual clean-up, so that:
- everything the program's processes spend counts: import time, threads (wait4 of the process), and helpers it
  forked but did not wait for (reaped by the runner as sub-reaper, their rusage added here);
- nothing survives from one run into the next (processes killed, files wiped): no cache on disk, no daemon
  working for the next run, no interference with the other program's run;
- memory kept in files counts as memory: a run's peak memory is its processes' peak RSS plus what its files hold
  on the sandbox's tmpfs mounts (sampled while a judge job runs, and once more before the wipe).

job = {"programs": {name: {"code", "module"}}, "order": [names alternated per round], "once": [names measured in
       the first round only], "points": [{"name", "judge": spec} | {"name", "io": [stdin, ...]}], "rounds": int,
       "max_rounds": int, "graded_rounds": int, "agree": float, "full": float, "zero": float,
       "margin_one": float}
(limits.total_s caps the whole measurement)
After `rounds` rounds, more are run (up to `max_rounds`) unless every per-round ratio of the two programs in
"order" at the first point is at most `full` or at least `zero` (ratios the host scores as 1 or as 0 on time,
whichever estimate it takes of them; after a single round only with a margin of a factor 1 + margin_one): at
least `graded_rounds` (and 2), and until each program's two lowest runs agree
within a factor 1 + agree (or 0.5 ms), so that neither one run hit by a burst of interference nor one run that
met a lull decides the host's estimate (the mean of each program's two lowest runs).
result = {"status": "ok" | "timeout", "runs": [{"program", "point", "round", "status", "passed", "cases",
          "digests", "cpu_ms", "peak_memory_kb", "wall_ms"}]}
"""

from __future__ import annotations

import time

import usage

MAX_ROUNDS = 15


def measure_job(runner, job: dict, limits: dict) -> dict:
    programs = job["programs"]
    order = [p for p in job.get("order", []) if p in programs]
    once = [p for p in job.get("once", []) if p in programs]
    rounds = max(1, min(int(job.get("rounds", 3)), MAX_ROUNDS))
    max_rounds = max(rounds, min(int(job.get("max_rounds", rounds)), MAX_ROUNDS))
    agree = float(job.get("agree", 0.1))
    full = float(job.get("full", 0.0))
    zero = float(job.get("zero", 0.0))  # 0: no such shortcut
    margin_one = float(job.get("margin_one", 0.15))
    graded_rounds = int(job.get("graded_rounds", rounds))
    deadline = time.monotonic() + float(limits["total_s"])
    runs: list[dict] = []
    for rnd in range(max_rounds):
        if rnd >= rounds and _settled(runs, order, job["points"][0]["name"], agree, full, zero,
                                          margin_one, graded_rounds):
            break
        # Alternate who goes first, so that neither program always runs right after the other's clean-up.
        names = order if rnd % 2 == 0 else order[::-1]
        for i, point in enumerate(job["points"]):
            for name in names + (once if rnd == 0 and i == 0 else []):
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"status": "timeout", "error": "the measurement exceeded its time cap", "runs": runs}
                run = _measure_one(runner, programs[name], point, {**limits, "total_s": min(left, limits["total_s"])})
                if run is None:  # only that run's own processes could outlive its wipe: its failure, never ours
                    runs.append({"program": name, "point": point["name"], "round": rnd, "status": "runtime_error",
                                 "passed": False, "cases": 0, "digests": [], "cpu_ms": 0.0, "peak_memory_kb": 0,
                                 "wall_ms": 0.0, "error": "a process of this run survived clean-up"})
                    return {"status": "ok", "runs": runs}  # the runner replaces the sandbox after the job
                spec_error = run.pop("spec_error")
                if spec_error and name not in once:  # the no-op may break a set-up that uses the program's names
                    return {"status": "ok", "spec_error": spec_error, "runs": runs}
                runs.append({"program": name, "point": point["name"], "round": rnd, **run})
    return {"status": "ok", "runs": runs}


def _settled(runs: list[dict], order: list[str], point: str, agree: float, full: float, zero: float,
             margin_one: float, graded_rounds: int) -> bool:
    """Enough rounds: at the first point every per-round ratio is at most `full` or at least `zero` (all score the
    same on time; after one round only by a factor 1 + margin_one), or there were `graded_rounds` rounds (at least
    2) and each program's two lowest runs agree within a factor 1 + agree (or 0.5 ms)."""
    if len(order) != 2:
        return True
    cpu = {(r["program"], r["round"]): r["cpu_ms"] for r in runs if r["point"] == point}
    s = sorted(cpu[(order[0], k)] / max(cpu[(order[1], k)], 0.1) for k in {r for _, r in cpu}
               if (order[0], k) in cpu and (order[1], k) in cpu)
    if not s:
        return False
    # One round settles only with a margin from the clip points (a run next to a busy core was seen 14 % off its
    # program's level); two rounds need none, every per-round ratio being on the same side.
    margin = 1.0 + margin_one if len(s) == 1 else 1.0
    if s[-1] * margin <= full or (zero and s[0] >= zero * margin):
        return True
    if len(s) < max(graded_rounds, 2):
        return False
    for name in order:  # each program's two lowest runs agree within `agree` (or 0.5 ms)
        own = sorted(c for (p, _), c in cpu.items() if p == name)
        if own[1] > own[0] * (1 + agree) and own[1] - own[0] > 0.5:
            return False
    return True


def _measure_one(runner, program: dict, point: dict, limits: dict) -> dict | None:
    runner.orphan_cpu_ms, runner.orphan_maxrss_kb = 0.0, 0
    started = time.monotonic()
    files_before = usage.files_written_kb()
    if "judge" in point:
        res = runner.judge_job({"candidate": program, "judge": point["judge"]}, limits)
        cases = [e for e in res.get("events", []) if e.get("event") == "case"]
        load: dict = next((e for e in res.get("events", []) if e.get("event") == "load"), {})
        passed = bool(cases) and bool(load.get("ok")) and all(c.get("passed") for c in cases)
        digests = [str(e.get("digest")) for e in res.get("events", []) if e.get("event") == "digest"]
        cpu, status = res.get("cpu_ms", 0.0), res.get("status")
        peak = res.get("peak_memory_kb", 0) + max(res.get("files_kb", 0), usage.files_written_kb() - files_before)
        spec_error = res.get("spec_error")
    else:
        cpu, peak, status, passed, digests, cases, spec_error = 0.0, 0, "ok", True, [], point["io"], None
        for stdin in point["io"]:
            res = runner.run_job({"program": {"code": program["code"], "filename": "solution.py"}, "stdin": stdin},
                                 limits, runner.zygote)
            cpu += res.get("cpu_ms", 0.0)
            peak = max(peak, res.get("peak_memory_kb", 0) + usage.files_written_kb() - files_before)
            if res.get("status") != "ok":
                status, passed = res.get("status"), False
            if not _clean(runner):
                return None
    if not _clean(runner):  # kills what is left; the runner reaps the orphans and keeps their rusage
        return None
    return {"spec_error": spec_error, "status": status, "passed": passed, "cases": len(cases), "digests": digests,
            "cpu_ms": cpu + runner.orphan_cpu_ms, "peak_memory_kb": max(peak, runner.orphan_maxrss_kb),
            "wall_ms": (time.monotonic() - started) * 1000.0}


def accounted(runner, run) -> dict:
    """A tests-stage job (judge or run) with its usage counted as _measure_one counts a run's: the efficiency of an
    item without a reference is then read from the job that ran its tests, with no second measuring job.
    result["usage"] = {"cpu_ms", "peak_memory_kb", "complete"}; complete is false when a process of the job
    survived clean-up (its cost is unknown: the host scores nothing from it)."""
    runner.orphan_cpu_ms, runner.orphan_maxrss_kb = 0.0, 0
    files_before = usage.files_written_kb()
    res = run()
    files = max(res.get("files_kb", 0), usage.files_written_kb() - files_before)
    complete = _clean(runner)  # kills what is left; the runner reaps the orphans and keeps their rusage
    res["usage"] = {"cpu_ms": res.get("cpu_ms", 0.0) + runner.orphan_cpu_ms,
                    "peak_memory_kb": max(res.get("peak_memory_kb", 0) + files, runner.orphan_maxrss_kb),
                    "complete": complete}
    return res


def _clean(runner) -> bool:
    uids = set(runner.used_uids)
    clean = runner.after_job()
    runner.reap()
    runner.used_uids.clear()
    if not clean:  # left for the serve loop's own clean-up after the job, which replaces the sandbox if it fails
        runner.used_uids |= uids
    return clean
