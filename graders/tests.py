"""Run a program against its tests in the sandbox and turn what happened into an Outcome.

assert / function / pytest tests run as a judge job: the tests execute in a judge process under their own uid and
reach the candidate only through a plain-data channel (sandboxes/inside/judge.py). io tests run the program once
per case, every case of the item in one cases job (graders/io_cases.py); its stdout is compared on the host
(graders/verdicts.py), so expected outputs never enter the sandbox.
Each kind of tests has its runner: Python's are here (it runs in the runner's forked interpreter, no compile
step), the other languages' in graders/compiled.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sandboxes import JudgeJob, Limits, Result, RunJob
from sandboxes.builds import JobRunner
from sandboxes.languages import LANGUAGES

from . import compiled, io_cases
from .flags import flags_for, scans_quickly
from .outcome import Outcome
from .runs import ProgramRun, Runner
from .verdicts import from_judge, from_runs


def job_limits(timeout_s: float, memory_mb: int, max_item_s: float) -> Limits:
    return Limits(wall_s=timeout_s, total_s=max_item_s, cpu_s=max(timeout_s, 1.0), memory_mb=memory_mb)


async def run_tests(pool: JobRunner, code: str, tests: Any, limits: Limits, language: str = "python",
                    builder: Any = None, compile_timeout_s: float = 30.0, account: bool = False) -> Outcome:
    """tests: a service.models test spec (or None: just run the program once). Languages other than Python
    compile first (builder: a sandboxes.builds.Builder, whose cache the caller keeps). account (Python): the
    outcome carries the runner's accounting of the stage (Outcome.usage), counted as a measuring run counts it.

    The flags are computed here, from the source alone, and join every outcome: one that ended at load, in a
    hang, or as infra_error carries them as much as one that ran (graders/flags.py)."""
    run = ProgramRun(pool, LANGUAGES[language], code, tests, limits, builder, compile_timeout_s, account)
    if scans_quickly(language, code):  # in place: less than the hop to a thread and back
        flags, outcome = flags_for(language, code), await _run(run)
    else:  # in a thread, alongside the run, so that the event loop keeps serving meanwhile
        flags, outcome = await asyncio.gather(asyncio.to_thread(flags_for, language, code), _run(run))
    outcome.flags = sorted(set(outcome.flags) | set(flags))
    return outcome


def runners_for(language: str) -> dict[str | None, Runner]:
    """tests.kind -> runner, for a language of the registry."""
    return RUNNERS if LANGUAGES[language].in_process else compiled.RUNNERS


async def _run(run: ProgramRun) -> Outcome:
    runner = runners_for(run.language.name).get(run.kind)
    if runner is None:  # validation refuses the kinds a language lacks; repo items go to graders/repo.py
        return Outcome("invalid_input", message=f"tests.kind {run.kind!r} is not run for {run.language.name}")
    return await runner(run)


async def _script(run: ProgramRun) -> Outcome:
    runs = [await _run_program(run, "")]
    return _accounted(from_runs(runs, None, None), runs)


async def _io(run: ProgramRun) -> Outcome:
    cases = run.tests.cases
    program = {"code": run.code, "filename": run.language.source}
    runs, jobs = await io_cases.run_cases(run.pool, program, [c.stdin for c in cases], run.limits,
                                          account=run.account)
    outcome = _accounted(from_runs(runs, [c.stdout for c in cases], run.tests.compare), jobs)
    outcome.details["io"] = io_cases.details_of(jobs)
    return outcome


async def _judge(run: ProgramRun) -> Outcome:
    spec = run.tests.model_dump(exclude_none=True)
    result = await run.pool.run(JudgeJob(candidate={"code": run.code, "module": "solution"}, judge=spec,
                                    limits=run.limits, account=run.account))
    return _accounted(from_judge(result, getattr(run.tests, "entry_point", None)), [result])


async def _run_program(run: ProgramRun, stdin: str) -> Result:
    return await run.pool.run(RunJob(program={"code": run.code, "filename": run.language.source}, stdin=stdin,
                                  limits=run.limits, account=run.account))


def _accounted(outcome: Outcome, results: Sequence[Result]) -> Outcome:
    """The stage's usage over its jobs (the io cases jobs): CPU summed, peak memory the largest, as measure.py sums
    the cases of one measured run. Absent unless every job was accounted."""
    usages = [r.usage for r in results if r.usage is not None]
    if usages and len(usages) == len(results):
        outcome.usage = {"cpu_ms": sum(u["cpu_ms"] for u in usages),
                         "peak_memory_kb": max(u["peak_memory_kb"] for u in usages),
                         "complete": all(u["complete"] for u in usages)}
    return outcome


# Python's runners (tests.kind, None: no tests); which kinds it takes is its registry entry's test_kinds.
RUNNERS: dict[str | None, Runner] = {
    None: _script,
    "io": _io,
    "assert": _judge,
    "function": _judge,
    "pytest": _judge,
}
