"""Efficiency measurement: one measuring job per item (sandboxes/inside/measure.py), then the formulas in efficiency.py.

The candidate and the reference run the item's tests (and each tests.scaling size) alternately in one sandbox, so
both see the same machine. The reference's own CPU time is calibrated per (reference, tests) hash (the lowest
accepted measurement): when a later measurement is off by more than a factor DRIFT (and 2 ms), the item is measured
once more; if it is still off, efficiency is null with the reason, never a noisy number, and the calibration moves
to the new value.

Without a reference there is nothing to alternate with: the score is the candidate's cost against its limits, and
that cost is read from the job that ran its tests (Outcome.usage: the runner's accounting of that job, orphans and
tmpfs files included, exactly as a measuring run counts them), less a no-op program's peak memory measured once per
test kind. A second measuring job cost ~111 ms per HumanEval item for a score that is ~1.000 on all of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sandboxes import Limits, MeasureJob, Status
from sandboxes.builds import JobRunner

from .efficiency import FULL, TESTS, ZERO, EfficiencyReport, Runs, against_limits, against_reference

DEFAULT_ROUNDS = 1  # rounds always run; each costs one candidate and one reference run
GRADED_ROUNDS = 3  # at least this many unless every per-round ratio already scores alike (1, or 0 on time); 2 stopped
# on two agreeing rounds that were off together (score 0.013 from the median on average, 0.005 with 5 rounds)
MARGIN_ONE = 0.15  # one round settles a clipped score only this far (x1.15) inside the clip point
MAX_ROUNDS = 7  # more rounds, up to this, until each program's two lowest runs agree within AGREE
AGREE = 0.03  # 5 % with the single lowest run as the estimate: one lull decided a score (see efficiency.py)
DRIFT = 2.0  # reference CPU beyond calibration x DRIFT (or / DRIFT) is a drift; whole spells of x1.6 (a busy
# neighbour core) were measured on these VMs, so a tighter bound turned ordinary load into null scores
NOOP = {"code": "pass\n", "module": "solution"}


@dataclass(frozen=True)
class Workload:
    """What the programs run: the item's tests (a judge spec, or io stdins) and optional scaling sizes."""

    judge: dict[str, Any] | None  # judge spec for assert / function / pytest tests
    io: list[str] | None  # stdin of each io case (or [""] for a program without tests)
    scaling: dict[str, Any] | None  # {"generator", "function", "sizes"} and the entry point in judge
    entry_point: str | None = None

    def points(self) -> list[dict[str, Any]]:
        points: list[dict[str, Any]] = [{"name": TESTS, "judge": self.judge} if self.judge
                                        else {"name": TESTS, "io": self.io or [""]}]
        if self.scaling:
            for n in self.scaling["sizes"]:
                points.append({"name": f"n={n}", "judge": {
                    "kind": "scaling", "entry_point": self.entry_point, "n": n,
                    "generator": self.scaling["generator"], "function": self.scaling.get("function", "generate")}})
        return points

    def key(self, reference: str) -> str:
        blob = json.dumps([reference, self.judge, self.io, self.scaling], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def workload_of(tests: Any) -> Workload:
    """From a service.models test spec (or None)."""
    if tests is None:
        return Workload(None, [""], None)
    if tests.kind == "io":
        return Workload(None, [c.stdin for c in tests.cases], None)
    spec = tests.model_dump(exclude_none=True)
    scaling = spec.pop("scaling", None)
    return Workload(spec, None, scaling, spec.get("entry_point"))


class EfficiencyGrader:
    def __init__(self, pool: JobRunner, rounds: int | None = None, cache_size: int = 4096) -> None:
        self.pool = pool
        self.rounds = rounds or DEFAULT_ROUNDS
        self.calibration: OrderedDict[str, float] = OrderedDict()  # workload key -> reference CPU ms
        self.cache_size = cache_size
        self.floors: dict[str, float] = {}  # test kind -> the no-op program's peak memory (KiB) in such a job
        self.floor_lock = asyncio.Lock()

    async def grade(self, code: str, reference: str | None, tests: Any, limits: Limits, timeout_s: float,
                    memory_mb: int, usage: dict[str, Any] | None = None, cases: int = 1) -> EfficiencyReport:
        """usage (only read without a reference): the tests stage's own accounting (Outcome.usage) over its
        `cases` test cases; without it the candidate is measured by a job of its own."""
        work = workload_of(tests)
        if reference is None and usage is not None:
            return await self._from_usage(work, usage, cases, limits, timeout_s, memory_mb)
        if reference is None:
            runs, error = await self._measure(work, {"candidate": code}, limits, rounds=1)
            if runs is None:
                return EfficiencyReport(None, reason=error)
            return against_limits(runs, timeout_s, memory_mb)
        key = work.key(reference)
        # The complexity fit takes medians per size: never from a single round.
        rounds = max(self.rounds, GRADED_ROUNDS) if work.scaling else self.rounds
        drift = ""
        for _attempt in range(2):
            runs, error = await self._measure(work, {"candidate": code, "reference": reference}, limits, rounds)
            if runs is None:
                return EfficiencyReport(None, reason=error)
            if runs.failure("reference") or runs.failure("candidate"):
                return against_reference(runs, None)  # says which run failed
            drift = self._drift(key, runs.cpu("reference"))
            if not drift:
                break
        assert runs is not None  # the loop returned otherwise
        if drift:
            self._calibrate(key, min(runs.cpu("reference")), replace=True)
            return EfficiencyReport(None, reason=f"reference cost drifted, measured twice: {drift}")
        self._calibrate(key, min(runs.cpu("reference")))
        report = against_reference(runs, work.scaling["sizes"] if work.scaling else None)
        report.inputs["calibrated_reference_cpu_ms"] = round(self.calibration[key], 3)
        report.inputs["rounds"] = len(runs.cpu("reference"))
        return report

    async def _from_usage(self, work: Workload, usage: dict[str, Any], cases: int, limits: Limits,
                          timeout_s: float, memory_mb: int) -> EfficiencyReport:
        if not usage.get("complete"):
            return EfficiencyReport(None, reason="not measurable: a process of the tests' run survived clean-up")
        floor = await self._floor(work, limits)
        if floor is None:
            return EfficiencyReport(None, reason="sandbox error")
        runs = Runs([{"program": "candidate", "point": TESTS, "round": 0, "status": "ok", "passed": True,
                      "cases": cases, "cpu_ms": usage["cpu_ms"], "peak_memory_kb": usage["peak_memory_kb"]},
                     {"program": "noop", "point": TESTS, "round": 0, "status": "ok", "passed": False,
                      "cases": 0, "cpu_ms": 0.0, "peak_memory_kb": floor}])
        report = against_limits(runs, timeout_s, memory_mb)
        report.inputs["measured_by"] = "tests stage"
        return report

    async def _floor(self, work: Workload, limits: Limits) -> float | None:
        """The no-op program's peak memory in a job like the item's (its own tests, failing them), measured once
        per test kind: the interpreter and harness weigh the same whatever the program."""
        kind = str((work.judge or {}).get("kind", "io"))
        async with self.floor_lock:
            if kind not in self.floors:
                points = [p for p in work.points() if p["name"] == TESTS]
                measure = {"programs": {"noop": NOOP}, "order": [], "once": ["noop"], "rounds": 1, "points": points}
                result = await self.pool.run(MeasureJob(measure=measure, limits=limits))
                peaks = [float(r["peak_memory_kb"]) for r in result.runs if r.get("program") == "noop"]
                if result.status != Status.OK or not peaks or peaks[0] <= 0:
                    return None
                self.floors[kind] = peaks[0]
            return self.floors[kind]

    def _drift(self, key: str, ref_cpu: list[float]) -> str:
        """The reference's cost now (its least disturbed run) against its calibration."""
        calibrated, now = self.calibration.get(key), min(ref_cpu)
        if calibrated and (now > calibrated * DRIFT or now < calibrated / DRIFT) and abs(now - calibrated) > 2.0:
            return f"reference {now:.2f} ms CPU against {calibrated:.2f} ms calibrated"
        return ""

    def _calibrate(self, key: str, value: float, replace: bool = False) -> None:
        """Keep the lowest accepted reference cost (interference only adds CPU time); replace after a drift."""
        if key not in self.calibration or replace or value < self.calibration[key]:
            self.calibration[key] = value
        self.calibration.move_to_end(key)
        if len(self.calibration) > self.cache_size:
            self.calibration.popitem(last=False)

    async def _measure(self, work: Workload, codes: dict[str, str], limits: Limits,
                       rounds: int) -> tuple[Runs | None, str]:
        programs = {name: {"code": c, "module": "solution"} for name, c in codes.items()}
        programs["noop"] = NOOP
        measure = {"programs": programs, "order": list(codes), "once": ["noop"], "rounds": rounds,
                   "max_rounds": max(rounds, MAX_ROUNDS), "agree": AGREE, "full": FULL, "zero": ZERO,
                   "margin_one": MARGIN_ONE, "graded_rounds": max(rounds, GRADED_ROUNDS),
                   "points": work.points()}
        result = await self.pool.run(MeasureJob(measure=measure, limits=limits))
        if result.status == Status.SANDBOX_ERROR:
            return None, "sandbox error"
        if result.status != Status.OK:
            return None, f"the measurement ended {result.status}: {result.error or ''}".strip()
        if result.spec_error:
            return None, f"test specification: {result.spec_error}"
        return Runs(result.runs), ""
