"""io tests as cases jobs: every case of one program in one sandbox job (sandboxes/inside/cases.py).

A job per case cost a host round trip, a job's set-up and clean-up per case (issue 25: 13 ms per small case);
a cases job forks each case from the zygote in the sandbox and answers once. The stdins go in, the outputs come
back; the expected outputs stay here and are compared by graders/verdicts.py.

One job's input is capped (JOB_INPUT_BYTES: the request is one frame of the runner's protocol), so an item with
more input than that runs as several jobs, which the pool may also run side by side; and a job whose reply fills
up with output answers with the cases it ran, the rest going in the next job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sandboxes import CasesJob, Limits, Result
from sandboxes.builds import JobRunner

JOB_INPUT_BYTES = 8 << 20  # x6, JSON's worst escape of a byte (\u0001), stays under the runner's 64 MiB frame
PATH = "cases_job"  # details.io.path: which path ran the io tests (details.timings holds numbers, in ms)
COMPILED_ONCE_PATH = "cases_job+compiled_once"  # a Python program compiled once, its cases forked from there


def path_of(jobs: Sequence[Result]) -> str:
    """details.io.path of an item's cases jobs: compiled once when every job of it said so."""
    return COMPILED_ONCE_PATH if jobs and all(j.timings.get("compiled_once") for j in jobs) else PATH


def details_of(jobs: Sequence[Result]) -> dict[str, Any]:
    """details.io of an item's cases jobs: the path, the number of jobs, and how many cases a locked case zygote
    started (sandboxes/inside/locked_cases.py; the others locked themselves down, as a lone run does)."""
    return {"path": path_of(jobs), "jobs": len(jobs),
            "locked_cases": sum(int(j.timings.get("locked_zygote") or 0) for j in jobs)}


def chunks(stdins: Sequence[str], limit: int = JOB_INPUT_BYTES) -> list[list[str]]:
    """The stdins in order, cut into runs of at most limit bytes (a larger single stdin goes alone)."""
    out: list[list[str]] = []
    size = 0
    for stdin in stdins:
        n = len(stdin) if stdin.isascii() else len(stdin.encode(errors="replace"))  # isascii: a flag, no copy
        if not out or (size + n > limit and out[-1]):
            out.append([])
            size = 0
        out[-1].append(stdin)
        size += n
    return out


def case_results(result: Result, count: int) -> list[Result]:
    """One Result per case of a cases job; a job that did not run its cases (a fault of ours, the sandbox out of
    memory) gives its own result to each of them."""
    if len(result.cases) != count:
        return [result] * count
    return [_with_sandbox(Result.from_wire(case), result.sandbox_id) for case in result.cases]


def _with_sandbox(result: Result, sandbox_id: str | None) -> Result:
    result.sandbox_id = sandbox_id
    return result


async def run_cases(pool: JobRunner, program: dict[str, Any], stdins: Sequence[str], limits: Limits, *,
                    files: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                    account: bool = False) -> tuple[list[Result], list[Result]]:
    """Every case of one program: (one Result per case, in order; the jobs' own Results, for their usage)."""

    async def part(stdins: list[str]) -> tuple[list[Result], list[Result]]:
        cases: list[Result] = []
        jobs: list[Result] = []
        while len(cases) < len(stdins):
            left = stdins[len(cases):]
            job = await pool.run(CasesJob(program=program, stdins=left, files=files, env=env, limits=limits,
                                          account=account))
            jobs.append(job)
            if not 0 < len(job.cases) <= len(left):  # it ran no case (a fault, the sandbox out of memory)
                return cases + case_results(job, len(left)), jobs
            cases += case_results(job, len(job.cases))  # a reply full of output: the rest in the next job
        return cases, jobs

    parts = await asyncio.gather(*(part(p) for p in chunks(stdins)))
    return [r for cases, _ in parts for r in cases], [j for _, jobs in parts for j in jobs]
