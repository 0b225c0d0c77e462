"""Efficiency: CPU time and peak memory of the program on its tests, only for programs that pass every test.

    efficiency = 0.7 * time_score + 0.3 * memory_score                                  (0..1, or null)

With reference_code (run through the same tests in the same pool):
    time ratio r = candidate CPU / reference CPU (whole sandboxed job, kernel accounting)
    time_score   = 1 if r <= 1.25, 0 if r >= 16, else 1 - ln(r / 1.25) / ln(16 / 1.25)
    memory: m = (candidate peak - baseline) / (reference peak - baseline), with differences under 2 MiB ignored;
    memory_score uses the same clip points as time.
Without a reference, relative to the limits:
    time_score   = 1 - CPU / (timeout_s * cases), memory_score = 1 - (peak - baseline) / memory limit, clipped.
`null` when not measurable (tests failed, the reference failed, or the run was not ours to trust).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .outcome import Outcome

TIME_WEIGHT, MEMORY_WEIGHT = 0.7, 0.3
FULL, ZERO = 1.25, 16.0
MEMORY_SLACK_KB = 2048


@dataclass
class EfficiencyReport:
    score: float | None
    time_score: float | None = None
    memory_score: float | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def ratio_score(r: float) -> float:
    if r <= FULL:
        return 1.0
    if r >= ZERO:
        return 0.0
    return 1.0 - math.log(r / FULL) / math.log(ZERO / FULL)


def against_reference(cand: Outcome, ref: Outcome | None, baseline_kb: int) -> EfficiencyReport:
    if not cand.all_passed:
        return EfficiencyReport(None, reason="measured only for programs that pass every test")
    if ref is None or not ref.all_passed:
        return EfficiencyReport(None, reason="the reference solution did not pass the tests")
    time_ratio = cand.cpu_ms / max(ref.cpu_ms, 0.1)
    cand_mem = max(cand.peak_memory_kb - baseline_kb, 0)
    ref_mem = max(ref.peak_memory_kb - baseline_kb, 0)
    mem_ratio = 1.0 if cand_mem - ref_mem <= MEMORY_SLACK_KB else cand_mem / max(ref_mem, MEMORY_SLACK_KB)
    t, m = ratio_score(time_ratio), ratio_score(mem_ratio)
    return EfficiencyReport(
        round(TIME_WEIGHT * t + MEMORY_WEIGHT * m, 6), t, m,
        {"cpu_ms": cand.cpu_ms, "reference_cpu_ms": ref.cpu_ms, "time_ratio": time_ratio,
         "peak_memory_kb": cand.peak_memory_kb, "reference_peak_memory_kb": ref.peak_memory_kb,
         "memory_ratio": mem_ratio, "baseline_kb": baseline_kb},
    )


def against_limits(cand: Outcome, timeout_s: float, memory_mb: int, baseline_kb: int) -> EfficiencyReport:
    if not cand.all_passed:
        return EfficiencyReport(None, reason="measured only for programs that pass every test")
    budget_ms = timeout_s * 1000.0 * max(len(cand.verdicts), 1)
    t = min(1.0, max(0.0, 1.0 - cand.cpu_ms / budget_ms))
    m = min(1.0, max(0.0, 1.0 - max(cand.peak_memory_kb - baseline_kb, 0) / (memory_mb * 1024.0)))
    return EfficiencyReport(
        round(TIME_WEIGHT * t + MEMORY_WEIGHT * m, 6), t, m,
        {"cpu_ms": cand.cpu_ms, "cpu_budget_ms": budget_ms, "peak_memory_kb": cand.peak_memory_kb,
         "memory_limit_kb": memory_mb * 1024, "baseline_kb": baseline_kb},
    )
