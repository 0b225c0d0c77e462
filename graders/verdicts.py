"""Verdicts: turn what the sandbox reported (Results, the judge's events, a failed build) into an Outcome.

Pure functions over Results, shared by every test-kind runner (graders/tests.py for Python, graders/compiled.py
and graders/rust_tests.py for the other languages) and by graders/repo.py. io outputs are compared here, on the
host, so expected outputs never enter the sandbox.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sandboxes import Result, Status
from sandboxes.builds import Build
from sandboxes.languages import Language

from .outcome import FAILURE_ORDER, Outcome, Verdict

SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
COMPILE_MESSAGE_CAP = 2000


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


def execution(outcome: Outcome, result: Result) -> Outcome:
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
        return execution(Outcome(_program_status(result) or "infra_error", message=result.error or ""), result)
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
        return execution(outcome, result)
    outcome.executable = _defined(entry_point, load.get("names") or {})
    if not outcome.executable:
        outcome.message = f"entry point {entry_point!r} is not defined"
    if not verdicts:
        if result.status != Status.OK:  # the program ended the job (memory, disk, time) before the plan was known
            outcome.status, outcome.message = _program_status(result) or _run_status(result), result.error or ""
            return execution(outcome, result)
        return Outcome("invalid_input", message="the tests contain no test case")
    if outcome.all_passed:
        outcome.status = "passed"
    else:
        outcome.status = _program_status(result) or _worst([v.status for v in verdicts if not v.passed]) or "failed"
    return execution(outcome, result)


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


def from_runs(runs: Sequence[Result], expected: list[str] | None, compare: Any) -> Outcome:
    """One run per io case (or a single run without tests)."""
    if any(r.status == Status.SANDBOX_ERROR for r in runs):
        bad = next(r for r in runs if r.status == Status.SANDBOX_ERROR)
        return Outcome("infra_error", message=bad.error or "sandbox error")
    first = runs[0]
    if _is_syntax_error(first):
        outcome = Outcome("syntax_error", message=first.stderr.strip().splitlines()[-1][:300])
        if expected is not None:
            outcome.verdicts = [Verdict(f"case {i}", False, "not_run", "syntax error") for i in range(len(runs))]
        return execution(outcome, first)
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
    agg = execution(outcome, max(runs, key=lambda r: r.peak_memory_kb))
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
