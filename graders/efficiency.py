"""Efficiency formulas: measured runs in, one score out (pure functions; the measuring is in efficiency_measure.py).

    efficiency = complexity_factor * (0.7 * time_score + 0.3 * memory_score)          (0..1, or null)

Inputs come from one measuring job: candidate and reference run the item's tests alternately in ONE sandbox for
`rounds` rounds (whole sandboxed job: import time, threads and forked helpers count), plus a no-op program once.
    time ratio   r = low(candidate CPU) / low(reference CPU), all in the one job, where low is the mean of a
                   program's two lowest runs. Interference mostly adds CPU time (cache misses, cycles stolen by
                   other tenants), in bursts and in sustained spells, so a program's least disturbed runs are its
                   best estimate, and the job is short (one sandbox, back-to-back runs), so a sustained spell
                   raises both alike. But a single run can also meet a lull and come out well below its program's
                   level (next to a busy core: one reference run at 13.97 ms against 16.2-18.3 ms for its six
                   others, moving the score by 0.03), so one run alone never sets it: the two lowest must agree.
                   1 round when its ratio is x1.15 inside a clip point (<= 1.25 / 1.15, >= 16 x 1.15), 2 when
                   every per-round ratio is <= 1.25 or >= 16 (all score alike on time), else 3 to 7, until each
                   program's two lowest runs agree within 3 % (or 0.5 ms); with scaling at least 2. The median
                   of the per-round ratios is reported too (bench/efficiency_stability.py compares the two).
    time_score   = 1 if r <= 1.25, 0 if r >= 16 (or a timeout), else 1 - ln(r / 1.25) / ln(16 / 1.25)
    extra memory = median peak memory - the no-op program's (same sandbox, same way); a run's peak memory is its
                   processes' peak RSS plus what its files hold on the sandbox's tmpfs (memory all the same)
    memory ratio = 1 if candidate extra - reference extra <= 2 MiB, else candidate extra / max(reference extra, 2 MiB)
    memory_score = the time clip points applied to the memory ratio
    complexity_factor (only with tests.scaling): slopes s of log(CPU(n) - no-op CPU) against log(n), fitted by least
                   squares over the sizes (median CPU per size); excess e = s_candidate - s_reference, but never
                   less than log(w / 2) / log(n_max / n_min), w the candidate's worst CPU ratio to the reference
                   at any size (min over rounds each): a program can only ever *add* CPU time, so burning a
                   constant time on small inputs flattens its fitted slope but raises its ratio there, and the
                   ratio bound still holds (constant factors up to 2 are free of it);
                   1 if e <= 0.3, 0 if e >= 1.5 (or a timeout at any size), linear between; 1 without scaling.
Without a reference the candidate is measured alone, relative to its limits:
    time_score = 1 - CPU / (timeout_s * cases), memory_score = 1 - extra memory / memory limit, clipped to 0..1.
`null` (with a reason) when not measurable: tests failed, the reference failed, a measured run failed, answers at a
scaling size differ from the reference's, or the reference's own cost drifted from its calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Any

TIME_WEIGHT, MEMORY_WEIGHT = 0.7, 0.3
FULL, ZERO = 1.25, 16.0  # ratio clip points: <= FULL scores 1, >= ZERO scores 0
MEMORY_SLACK_KB = 2048  # memory differences smaller than this are ignored
SLOPE_SLACK, SLOPE_ZERO = 0.3, 1.5  # complexity: slope excess up to SLOPE_SLACK is free, SLOPE_ZERO scores 0
MIN_FIT_MS = 2.0  # CPU above the no-op floor is clamped to this before taking logs (below it: noise)
RATIO_SLACK = 2.0  # complexity: a worst per-size CPU ratio up to this is a constant factor, not a slope
TESTS = "tests"  # the measured point that runs the item's own tests


@dataclass
class EfficiencyReport:
    score: float | None
    time_score: float | None = None
    memory_score: float | None = None
    complexity_factor: float | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def ratio_score(r: float) -> float:
    if r <= FULL:
        return 1.0
    if r >= ZERO:
        return 0.0
    return 1.0 - math.log(r / FULL) / math.log(ZERO / FULL)


def memory_ratio(cand_extra_kb: float, ref_extra_kb: float) -> float:
    if cand_extra_kb - ref_extra_kb <= MEMORY_SLACK_KB:
        return 1.0
    return cand_extra_kb / max(ref_extra_kb, MEMORY_SLACK_KB)


def slope(sizes: list[int], cpu_ms: list[float]) -> float:
    """Least-squares slope of log(cpu) against log(n)."""
    xs = [math.log(n) for n in sizes]
    ys = [math.log(max(c, MIN_FIT_MS)) for c in cpu_ms]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def slope_factor(excess: float) -> float:
    if excess <= SLOPE_SLACK:
        return 1.0
    if excess >= SLOPE_ZERO:
        return 0.0
    return 1.0 - (excess - SLOPE_SLACK) / (SLOPE_ZERO - SLOPE_SLACK)


def combine(time_score: float, memory_score: float, factor: float) -> float:
    return round(factor * (TIME_WEIGHT * time_score + MEMORY_WEIGHT * memory_score), 6)


class Runs:
    """The records of one measuring job, indexed by (program, point)."""

    def __init__(self, records: list[dict]) -> None:
        self.records = records

    def of(self, program: str, point: str = TESTS) -> list[dict]:
        return [r for r in self.records if r["program"] == program and r["point"] == point]

    def cpu(self, program: str, point: str = TESTS) -> list[float]:
        return [float(r["cpu_ms"]) for r in self.of(program, point)]

    def low_cpu(self, program: str, point: str = TESTS) -> float:
        """The mean of the program's two lowest runs (its one run if it has only one)."""
        lowest = sorted(self.cpu(program, point))[:2]
        return sum(lowest) / len(lowest)

    def median_cpu(self, program: str, point: str = TESTS) -> float:
        return median(self.cpu(program, point))

    def extra_memory_kb(self, program: str, floor_kb: float) -> float:
        return max(median(float(r["peak_memory_kb"]) for r in self.of(program)) - floor_kb, 0.0)

    def failure(self, program: str) -> str | None:
        """Why a run of program cannot be used, or None."""
        for r in self.records:
            if r["program"] == program and (r["status"] != "ok" or not r["passed"]):
                return f"{program} run at {r['point']} ended {r['status']}{'' if r['passed'] else ', tests failed'}"
        return None

    def round_ratios(self, num: str, den: str) -> list[float]:
        by_round = {r["round"]: float(r["cpu_ms"]) for r in self.of(den)}
        return [float(r["cpu_ms"]) / max(by_round[r["round"]], 0.1) for r in self.of(num) if r["round"] in by_round]


def timed_out(runs: Runs, program: str) -> bool:
    return any(r["program"] == program and r["status"] == "timeout" for r in runs.records)


def complexity(runs: Runs, sizes: list[int], floor_ms: float) -> tuple[float, dict[str, Any], str]:
    """(factor, inputs, reason) from the scaling points of the candidate and the reference (whose timeouts
    against_reference has already scored)."""
    points = [f"n={n}" for n in sizes]
    for point in points:
        cand = [r["digests"] for r in runs.of("candidate", point)]
        ref = [r["digests"] for r in runs.of("reference", point)]
        if any(d != ref[0] for d in cand + ref):
            return 0.0, {}, f"answers at {point} differ from the reference's (or between rounds)"
    cand_ms = [runs.median_cpu("candidate", p) - floor_ms for p in points]
    ref_ms = [runs.median_cpu("reference", p) - floor_ms for p in points]
    s_cand, s_ref = slope(sizes, cand_ms), slope(sizes, ref_ms)
    worst = max(min(runs.cpu("candidate", p)) / max(min(runs.cpu("reference", p)), 0.1) for p in points)
    bound = ratio_bound(worst, sizes)
    inputs = {"sizes": sizes, "candidate_cpu_ms": _r(cand_ms), "reference_cpu_ms": _r(ref_ms),
              "candidate_slope": round(s_cand, 3), "reference_slope": round(s_ref, 3),
              "worst_ratio": round(worst, 4), "ratio_bound": round(bound, 3)}
    return slope_factor(max(s_cand - s_ref, bound)), inputs, ""


def ratio_bound(worst_ratio: float, sizes: list[int]) -> float:
    """The least slope excess a candidate whose worst per-size CPU ratio is worst_ratio can have, whatever
    constant time it added at the smaller sizes (up to RATIO_SLACK counts as a constant factor)."""
    return math.log(max(worst_ratio / RATIO_SLACK, 1.0)) / math.log(sizes[-1] / sizes[0])


def against_reference(runs: Runs, sizes: list[int] | None) -> EfficiencyReport:
    if timed_out(runs, "candidate"):
        return EfficiencyReport(0.0, 0.0, 0.0, 0.0, reason="the candidate timed out while being measured")
    for program in ("reference", "candidate"):
        why = runs.failure(program)
        if why:
            return EfficiencyReport(None, reason=f"not measurable: {why}")
    floor_kb = median(float(r["peak_memory_kb"]) for r in runs.of("noop"))
    floor_ms = runs.median_cpu("noop")
    ratios = runs.round_ratios("candidate", "reference")
    r = runs.low_cpu("candidate") / max(runs.low_cpu("reference"), 0.1)
    cand_mem, ref_mem = runs.extra_memory_kb("candidate", floor_kb), runs.extra_memory_kb("reference", floor_kb)
    m = memory_ratio(cand_mem, ref_mem)
    t_score, m_score = ratio_score(r), ratio_score(m)
    inputs: dict[str, Any] = {
        "cpu_ms": _r(runs.cpu("candidate")), "reference_cpu_ms": _r(runs.cpu("reference")),
        "round_ratios": _r(ratios, 4), "time_ratio": round(r, 4), "median_round_ratio": round(median(ratios), 4),
        "extra_memory_kb": cand_mem, "reference_extra_memory_kb": ref_mem, "memory_ratio": round(m, 4),
        "noop_cpu_ms": round(floor_ms, 3), "noop_peak_memory_kb": floor_kb,
    }
    factor, reason = 1.0, ""
    if sizes:
        factor, inputs["complexity"], reason = complexity(runs, sizes, floor_ms)
    return EfficiencyReport(combine(t_score, m_score, factor), t_score, m_score, factor, inputs, reason)


def against_limits(runs: Runs, timeout_s: float, memory_mb: int) -> EfficiencyReport:
    if timed_out(runs, "candidate"):
        return EfficiencyReport(0.0, 0.0, 0.0, reason="the candidate timed out while being measured")
    why = runs.failure("candidate")
    if why:
        return EfficiencyReport(None, reason=f"not measurable: {why}")
    floor_kb = median(float(r["peak_memory_kb"]) for r in runs.of("noop"))
    cases = max(runs.of("candidate")[0]["cases"], 1)
    cpu = runs.median_cpu("candidate")
    budget_ms = timeout_s * 1000.0 * cases
    extra = runs.extra_memory_kb("candidate", floor_kb)
    t = min(1.0, max(0.0, 1.0 - cpu / budget_ms))
    m = min(1.0, max(0.0, 1.0 - extra / (memory_mb * 1024.0)))
    return EfficiencyReport(
        combine(t, m, 1.0), t, m, None,
        {"cpu_ms": round(cpu, 3), "cpu_budget_ms": budget_ms, "extra_memory_kb": extra,
         "memory_limit_kb": memory_mb * 1024, "noop_peak_memory_kb": floor_kb},
    )


def _r(values: list[float], digits: int = 3) -> list[float]:
    return [round(v, digits) for v in values]
