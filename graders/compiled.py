"""Tests for the languages other than Python: compile once in a sandbox (cached), then run the cases.

- `io` (every language): one run per case, all cases in one cases job (graders/io_cases.py), stdout compared on
  the host (as for Python).
- `function` (JavaScript, TypeScript): a judge job; the program is loaded by the language's judge host
  (Language.judge_host_argv: candidate_host.js) under the candidate uid and called through the same plain-data
  channel as Python's, the tests run in judge.py under the judge uid.
- `rust_test` (Rust): see graders/rust_tests.py.
- no tests: one run without input.
A compile error is `syntax_error` (executability 0) with the compiler's message; a compiler that runs out of time
or memory ends the item as `timeout` / `memory_limit`, also with executability 0.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from sandboxes import JudgeJob, Result, Status
from sandboxes.builds import Build

from . import io_cases
from .outcome import Outcome
from .runs import ProgramRun, Runner
from .rust_tests import run_rust_tests
from .verdicts import compile_failure, from_judge, from_runs, memory_checked


def _built(then: Callable[[ProgramRun, Build], Awaitable[Outcome]]) -> Runner:
    """A runner that compiles the program first (cached): a failed build is the outcome, without running."""

    async def runner(run: ProgramRun) -> Outcome:
        assert run.builder is not None, "compiled languages need the caller's Builder"
        build = await run.builder.build(run.language, run.code, run.compile_timeout_s)
        if not build.ok:
            return compile_failure(build, run.case_names)
        outcome = await then(run, build)
        outcome.details["compile"] = {"ms": round(build.compile_ms, 3), "cached": build.cached}
        return outcome

    return runner


async def _run_binary(run: ProgramRun, build: Build, stdin: str) -> Result:
    result = await run.pool.run(run.language.run_job(run.code, build.files, stdin, run.limits))
    return memory_checked(run.language, result, run.limits.memory_mb)


async def _once(run: ProgramRun, build: Build) -> Outcome:
    return from_runs([await _run_binary(run, build, "")], None, None)


async def _io(run: ProgramRun, build: Build) -> Outcome:
    cases = run.tests.cases
    one = run.language.run_job(run.code, build.files, "", run.limits)  # the program, files and limits of a run
    runs, jobs = await io_cases.run_cases(run.pool, one.program, [c.stdin for c in cases], one.limits,
                                          files=one.files, env=one.env)
    runs = [memory_checked(run.language, r, run.limits.memory_mb) for r in runs]
    outcome = from_runs(runs, [c.stdout for c in cases], run.tests.compare)
    outcome.details["io"] = io_cases.details_of(jobs)
    return outcome


async def _judge_function(run: ProgramRun, build: Build) -> Outcome:
    lang, limits = run.language, run.limits
    files = lang.run_files(run.code, build.files)
    candidate = {"program": {"argv": lang.judge_host_argv_for(limits.memory_mb)}, "files": files}
    spec = run.tests.model_dump(exclude_none=True)
    result = await run.pool.run(JudgeJob(candidate=candidate, judge=spec, limits=lang.run_limits(limits)))
    if result.status == Status.OK and result.peak_memory_kb > limits.memory_mb * 1024:
        result = replace(result, status=Status.MEMORY_LIMIT)
    return from_judge(result, run.tests.entry_point)


async def _rust_test(run: ProgramRun) -> Outcome:
    assert run.builder is not None, "compiled languages need the caller's Builder"
    return await run_rust_tests(run.pool, run.builder, run.code, run.tests, run.limits, run.compile_timeout_s)


# tests.kind (None: no tests) -> its runner; which kinds a language takes is its registry entry's test_kinds.
RUNNERS: dict[str | None, Runner] = {
    None: _built(_once),
    "io": _built(_io),
    "function": _built(_judge_function),
    "rust_test": _rust_test,
}
