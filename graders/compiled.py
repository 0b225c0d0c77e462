"""Tests for the languages other than Python: compile once in a sandbox (cached), then run the cases.

- `io` (every language): one run per case, stdout compared on the host (as for Python).
- `function` (JavaScript, TypeScript): a judge job; the program is loaded by candidate_host.js under the candidate
  uid and called through the same plain-data channel as Python's, the tests run in judge.py under the judge uid.
- `rust_test` (Rust): see graders/rust_tests.py.
A compile error is `syntax_error` (executability 0) with the compiler's message; a compiler that runs out of time
or memory ends the item as `timeout` / `memory_limit`, also with executability 0.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from sandboxes import Job, Limits, Result, Status
from sandboxes.builds import Build, Builder, JobRunner
from sandboxes.languages import INSIDE, LANGUAGES, NODE_STACK, Language

from .outcome import Outcome, Verdict
from .tests import _from_runs, from_judge

COMPILE_MESSAGE_CAP = 2000
FUNCTION_LANGUAGES = ("javascript", "typescript")


def compile_failure(build: Build, case_names: list[str]) -> Outcome:
    if build.status == "infra_error":
        return Outcome("infra_error", message=build.diagnostics)
    outcome = Outcome(build.status, message=("compile: " if build.status != "syntax_error" else "")
                      + build.diagnostics[:COMPILE_MESSAGE_CAP])
    outcome.verdicts = [Verdict(n, False, "not_run", "the program does not compile") for n in case_names]
    outcome.details["compile"] = {"status": build.status, "ms": round(build.compile_ms, 3), "cached": build.cached}
    return outcome


def memory_checked(lang: Language, result: Result, memory_mb: int) -> Result:
    """VM runtimes run with address-space headroom: their memory limit is the peak RSS the kernel reports."""
    if result.status in (Status.OK, Status.RUNTIME_ERROR, Status.KILLED):
        over = lang.as_headroom_mb and result.peak_memory_kb > memory_mb * 1024
        if over or (result.status == Status.RUNTIME_ERROR and "memory allocation of" in result.stderr[-600:]):
            result.status = Status.MEMORY_LIMIT
    return result


async def run_language_tests(pool: JobRunner, builder: Builder, language: str, code: str, tests: Any,
                             limits: Limits, compile_timeout_s: float) -> Outcome:
    lang = LANGUAGES[language]
    kind = getattr(tests, "kind", None)
    if kind == "rust_test":
        from .rust_tests import run_rust_tests

        return await run_rust_tests(pool, builder, code, tests, limits, compile_timeout_s)
    names = [f"case {i}" for i in range(len(tests.cases))] if kind in ("io", "function") else []
    build = await builder.build(lang, code, compile_timeout_s)
    if not build.ok:
        return compile_failure(build, names)
    if kind == "function":
        outcome = await _judge_function(pool, lang, code, build, tests, limits)
    else:
        cases = tests.cases if kind == "io" else [None]

        async def one(case) -> Result:
            result = await pool.run(lang.run_job(code, build.files, case.stdin if case else "", limits))
            return memory_checked(lang, result, limits.memory_mb)

        runs = list(await asyncio.gather(*(one(c) for c in cases)))
        outcome = _from_runs(runs, [c.stdout for c in tests.cases] if kind == "io" else None,
                             tests.compare if kind == "io" else None)
    outcome.details["compile"] = {"ms": round(build.compile_ms, 3), "cached": build.cached}
    return outcome


async def _judge_function(pool: JobRunner, lang: Language, code: str, build: Build, tests: Any,
                          limits: Limits) -> Outcome:
    files = lang.run_files(code, build.files)
    candidate = {"program": {"argv": ["node", NODE_STACK, f"--max-old-space-size={limits.memory_mb}",
                                      f"{INSIDE}/candidate_host.js", "solution.js"]},
                 "files": files}
    spec = tests.model_dump(exclude_none=True)
    result = await pool.run(Job("judge", candidate=candidate, judge=spec, limits=lang.run_limits(limits)))
    if result.status == Status.OK and result.peak_memory_kb > limits.memory_mb * 1024:
        result = replace(result, status=Status.MEMORY_LIMIT)
    return from_judge(result, tests.entry_point)
