"""Run a program against its tests in the sandbox and turn what happened into an Outcome.

assert / function / pytest tests run as a judge job: the tests execute in a judge process under their own uid and
reach the candidate only through a plain-data channel (sandboxes/inside/judge.py). io tests run the program once
per case; its stdout is compared here, on the host, so expected outputs never enter the sandbox.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sandboxes import Job, Limits, Result, Status
from sandboxes.builds import JobRunner

from .flags import flags_for
from .outcome import FAILURE_ORDER, Outcome, Verdict

SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def job_limits(timeout_s: float, memory_mb: int, max_item_s: float) -> Limits:
    return Limits(wall_s=timeout_s, total_s=max_item_s, cpu_s=max(timeout_s, 1.0), memory_mb=memory_mb)


async def run_tests(pool: JobRunner, code: str, tests: Any, limits: Limits, language: str = "python",
                    builder: Any = None, compile_timeout_s: float = 30.0, account: bool = False) -> Outcome:
    """tests: a service.models test spec (or None: just run the program once). Languages other than Python
    compile first (builder: a sandboxes.builds.Builder, whose cache the caller keeps). account (Python): the
    outcome carries the runner's accounting of the stage (Outcome.usage), counted as a measuring run counts it.

    The flags are computed here, from the source alone, and join every outcome: one that ended at load, in a
    hang, or as infra_error carries them as much as one that ran (graders/flags.py)."""
    flags, outcome = await asyncio.gather(asyncio.to_thread(flags_for, language, code),
                                          _run(pool, code, tests, limits, language, builder, compile_timeout_s,
                                               account))
    outcome.flags = sorted(set(outcome.flags) | set(flags))
    return outcome


async def _run(pool: JobRunner, code: str, tests: Any, limits: Limits, language: str, builder: Any,
               compile_timeout_s: float, account: bool = False) -> Outcome:
    if language != "python":
        from .compiled import run_language_tests

        return await run_language_tests(pool, builder, language, code, tests, limits, compile_timeout_s)
    if tests is None:
        runs: Sequence[Result] = await asyncio.gather(_run_program(pool, code, "", limits, account))
        return _accounted(_from_runs(runs, None, None), runs)
    if tests.kind == "io":
        runs = await asyncio.gather(*(_run_program(pool, code, c.stdin, limits, account) for c in tests.cases))
        return _accounted(_from_runs(runs, [c.stdout for c in tests.cases], tests.compare), runs)
    spec = tests.model_dump(exclude_none=True)
    result = await pool.run(Job("judge", candidate={"code": code, "module": "solution"}, judge=spec, limits=limits,
                                account=account))
    return _accounted(from_judge(result, getattr(tests, "entry_point", None)), [result])


async def _run_program(pool: JobRunner, code: str, stdin: str, limits: Limits, account: bool = False) -> Result:
    return await pool.run(Job("run", program={"code": code, "filename": "solution.py"}, stdin=stdin, limits=limits,
                              account=account))


def _accounted(outcome: Outcome, results: Sequence[Result]) -> Outcome:
    """The stage's usage over its jobs (one per io case): CPU summed, peak memory the largest, as measure.py sums
    the cases of one measured run. Absent unless every job was accounted."""
    usages = [r.usage for r in results if r.usage is not None]
    if usages and len(usages) == len(results):
        outcome.usage = {"cpu_ms": sum(u["cpu_ms"] for u in usages),
                         "peak_memory_kb": max(u["peak_memory_kb"] for u in usages),
                         "complete": all(u["complete"] for u in usages)}
    return outcome


def _execution(outcome: Outcome, result: Result) -> Outcome:
    outcome.wall_ms, outcome.cpu_ms, outcome.peak_memory_kb = result.wall_ms, result.cpu_ms, result.peak_memory_kb
    outcome.stdout, outcome.stderr, outcome.truncated = result.stdout, result.stderr, result.truncated
    return outcome


def _defined(entry: str | None, names: dict) -> bool:
    return not entry or entry in names or ("." not in entry and "Solution" in names)


def from_judge(result: Result, entry_point: str | None) -> Outcome:
    if result.spec_error:
        return Outcome("invalid_input", message=f"test specification: {result.spec_error}")
    if result.status == Status.SANDBOX_ERROR:
        return Outcome("infra_error", message=result.error or "sandbox error")
    events = result.events
    load = next((e for e in events if e.get("event") == "load"), None)
    plan = next((e.get("cases") for e in events if e.get("event") == "plan"), None)
    cases = [e for e in events if e.get("event") == "case"]
    if load is None:
        return _execution(Outcome(_program_status(result) or "infra_error", message=result.error or ""), result)
    verdicts = [Verdict(c["name"], bool(c["passed"]), c["status"], c.get("message", ""), c.get("cpu_ms"))
                for c in cases]
    for name in (plan or [])[len(verdicts) :]:  # cases the job never reached (whole-item cap) are failed
        verdicts.append(Verdict(name, False, "not_run", result.error or "the item's time cap ran out before this case"))
    outcome = Outcome("failed", verdicts=verdicts)
    if not load.get("ok"):
        if load.get("stage") == "parse":
            outcome.status, outcome.message = "syntax_error", load.get("error", "")
        else:
            timed_out = load.get("status") == "timeout"
            outcome.status = _program_status(result) or ("timeout" if timed_out else "runtime_error")
            outcome.message = load.get("error", "")
        return _execution(outcome, result)
    outcome.executable = _defined(entry_point, load.get("names") or {})
    if not outcome.executable:
        outcome.message = f"entry point {entry_point!r} is not defined"
    if not verdicts:
        if result.status != Status.OK:  # the program ended the job (memory, disk, time) before the plan was known
            outcome.status, outcome.message = _program_status(result) or _run_status(result), result.error or ""
            return _execution(outcome, result)
        return Outcome("invalid_input", message="the tests contain no test case")
    if outcome.all_passed:
        outcome.status = "passed"
    else:
        outcome.status = _program_status(result) or _worst([v.status for v in verdicts if not v.passed]) or "failed"
    return _execution(outcome, result)


def _program_status(result: Result) -> str | None:
    """The program's own resource failure (memory, output), which outranks a plain failed test."""
    if result.status in (Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT):
        return str(result.status)
    if result.status == Status.TIMEOUT and result.error:  # the whole item ran out of time
        return "timeout"
    return None


def _worst(statuses: list[str]) -> str | None:
    for status in FAILURE_ORDER:
        if status in statuses:
            return status
    return None


def _run_status(result: Result) -> str:
    if result.status == Status.OK:
        return "passed"
    if result.status == Status.KILLED:
        return "runtime_error"
    return str(result.status)


def _is_syntax_error(result: Result) -> bool:
    last = result.stderr.strip().splitlines()[-1:] or [""]
    return result.status == Status.RUNTIME_ERROR and last[0].startswith(SYNTAX_ERRORS)


def _from_runs(runs: Sequence[Result], expected: list[str] | None, compare: Any) -> Outcome:
    """One run per io case (or a single run without tests)."""
    if any(r.status == Status.SANDBOX_ERROR for r in runs):
        bad = next(r for r in runs if r.status == Status.SANDBOX_ERROR)
        return Outcome("infra_error", message=bad.error or "sandbox error")
    first = runs[0]
    if _is_syntax_error(first):
        outcome = Outcome("syntax_error", message=first.stderr.strip().splitlines()[-1][:300])
        if expected is not None:
            outcome.verdicts = [Verdict(f"case {i}", False, "not_run", "syntax error") for i in range(len(runs))]
        return _execution(outcome, first)
    verdicts = []
    for i, run in enumerate(runs):
        status = _run_status(run)
        if expected is None:
            continue
        if status == "passed" and not outputs_match(run.stdout, expected[i], compare):
            verdicts.append(Verdict(f"case {i}", False, "failed", f"wrong output: {run.stdout[:80]!r}", run.cpu_ms))
        elif status == "passed":
            verdicts.append(Verdict(f"case {i}", True, "passed", "", run.cpu_ms))
        else:
            verdicts.append(Verdict(f"case {i}", False, status, run.stderr.strip()[-200:], run.cpu_ms))
    failures = [_run_status(r) for r in runs if r.status != Status.OK]
    outcome = Outcome("failed", executable=not failures, verdicts=verdicts)
    if expected is None:
        outcome.status = "passed" if not failures else Counter(failures).most_common(1)[0][0]
    elif outcome.all_passed:
        outcome.status = "passed"
    elif failures:
        outcome.status = _worst(failures) or "runtime_error"
    agg = _execution(outcome, max(runs, key=lambda r: r.peak_memory_kb))
    agg.cpu_ms = sum(r.cpu_ms for r in runs)
    agg.wall_ms = sum(r.wall_ms for r in runs)
    agg.stdout, agg.stderr = first.stdout, first.stderr
    return agg


def outputs_match(got: str, want: str, compare: Any) -> bool:
    got, want = got.replace("\r\n", "\n"), want.replace("\r\n", "\n")
    if compare == "exact":
        return got == want
    if compare == "tokens":
        return got.split() == want.split()
    if compare == "lines" or compare is None:
        return _lines(got) == _lines(want)
    tol = compare.float_tol
    a, b = got.split(), want.split()
    return len(a) == len(b) and all(_token_match(x, y, tol) for x, y in zip(a, b, strict=True))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().split("\n")]


INTEGER = re.compile(r"[+-]?[0-9]+")


def _canonical_int(token: str) -> str:
    """"+007" -> "7", "-0" -> "0": compared as text (int() of a 5,000-digit token would raise here)."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return ("-" if token.startswith("-") and digits != "0" else "") + digits


def _token_match(got: str, want: str, tol: float) -> bool:
    """float_tol is for floats: an expected integer token must come back as the same integer (a count off by
    89 in 123,456,789 is within 1e-6 relative, and wrong)."""
    if got == want:
        return True
    if INTEGER.fullmatch(want):
        return INTEGER.fullmatch(got) is not None and _canonical_int(got) == _canonical_int(want)
    try:
        g, w = float(got), float(want)
    except ValueError:
        return False
    if math.isnan(g) or math.isnan(w):
        return math.isnan(g) and math.isnan(w)
    return math.isclose(g, w, rel_tol=tol, abs_tol=tol)
