"""The efficiency formulas (graders/efficiency.py) on measured values given by hand: the clip curves, the slope fit,
and whole reports against a reference and against the limits. The measuring itself is tested in
test_efficiency.py, in real sandboxes."""

from __future__ import annotations

import math

import pytest

from graders.efficiency import (
    Runs,
    against_limits,
    against_reference,
    combine,
    memory_ratio,
    ratio_bound,
    ratio_score,
    slope,
    slope_factor,
)

SPAN = 16 / 1.25  # ln(r / 1.25) / ln(SPAN) is the share of the score a ratio r loses


@pytest.mark.parametrize(("ratio", "score"), [
    (0.5, 1.0), (1.25, 1.0), (16.0, 0.0), (100.0, 0.0),
    (1.25 * SPAN ** 0.5, 0.5), (1.25 * SPAN ** 0.25, 0.75), (1.25 * SPAN ** 0.9, 0.1),
])
def test_a_ratio_scores_one_up_to_1_25_and_zero_from_16_log_linear_between(ratio, score):
    assert ratio_score(ratio) == pytest.approx(score, abs=1e-12)


@pytest.mark.parametrize(("cand_kb", "ref_kb", "ratio"), [
    (3000, 1000, 1.0),  # 2000 KiB more: inside the 2 MiB slack
    (3048, 1000, 1.0),  # exactly 2048 more
    (100, 5000, 1.0),  # less than the reference
    (10000, 1000, 10000 / 2048),  # the reference's extra is raised to the slack before dividing
    (10000, 4000, 2.5),
])
def test_memory_differences_under_two_mib_are_free(cand_kb, ref_kb, ratio):
    assert memory_ratio(cand_kb, ref_kb) == pytest.approx(ratio)


@pytest.mark.parametrize(("sizes", "cpu_ms", "expected"), [
    ([10, 100, 1000], [10, 100, 1000], 1.0),
    ([10, 100, 1000], [100, 10_000, 1_000_000], 2.0),
    ([10, 100, 1000], [50, 50, 50], 0.0),
    ([10, 100, 1000], [0.5, 1.0, 1.5], 0.0),  # all under the 2 ms noise floor: clamped, flat
    ([16, 16], [3, 9], 0.0),  # one size only: no slope to fit
])
def test_slope_is_the_least_squares_fit_in_log_log(sizes, cpu_ms, expected):
    assert slope(sizes, cpu_ms) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("excess", "factor"), [(-1.0, 1.0), (0.3, 1.0), (0.9, 0.5), (1.2, 0.25), (1.5, 0.0),
                                                  (3.0, 0.0)])
def test_slope_excess_is_free_to_0_3_and_costs_everything_at_1_5(excess, factor):
    assert slope_factor(excess) == pytest.approx(factor)


@pytest.mark.parametrize(("worst", "sizes", "bound"), [
    (1.5, [10, 100, 1000], 0.0),  # up to a factor 2 is a constant, not a slope
    (2.0, [10, 100, 1000], 0.0),
    (8.0, [10, 100, 1000], math.log(4) / math.log(100)),
    (20.0, [1, 5, 10], 1.0),
])
def test_the_ratio_bound_is_the_least_slope_a_worst_ratio_implies(worst, sizes, bound):
    assert ratio_bound(worst, sizes) == pytest.approx(bound)


@pytest.mark.parametrize(("t", "m", "f", "score"), [(1, 1, 1, 1.0), (0.5, 1, 1, 0.65), (1, 0, 0.5, 0.35),
                                                     (0, 0, 1, 0.0)])
def test_time_weighs_0_7_memory_0_3_times_the_complexity_factor(t, m, f, score):
    assert combine(t, m, f) == score


def run(program: str, rnd: int, cpu_ms: float, peak_kb: float, point: str = "tests", status: str = "ok",
        passed: bool = True, digests: str = "d") -> dict:
    return {"program": program, "round": rnd, "point": point, "cpu_ms": cpu_ms, "peak_memory_kb": peak_kb,
            "status": status, "passed": passed, "digests": digests, "cases": 2}


NOOP = run("noop", 0, 5.0, 10_000)


def test_against_a_reference_the_least_disturbed_runs_are_compared():
    slow = 12.5 * SPAN ** 0.5  # 1.25 * SPAN ** 0.5 times the reference's best: time score 0.5
    # Each program's two lowest runs set its cost (one low run alone does not): the reference's 10 and 10, not its
    # disturbed 14; the candidate's slow and slow, not its disturbed slow + 30.
    runs = Runs([NOOP, run("reference", 0, 10.0, 12_000), run("candidate", 0, slow + 30, 13_000),
                 run("reference", 1, 10.0, 12_000), run("candidate", 1, slow, 13_000),
                 run("reference", 2, 14.0, 12_000), run("candidate", 2, slow, 13_000)])
    report = against_reference(runs, None)
    assert report.time_score == pytest.approx(0.5)
    assert report.memory_score == 1.0  # 3000 KiB extra against 2000: within the slack
    assert report.complexity_factor == 1.0
    assert report.score == pytest.approx(0.65)
    assert report.inputs["time_ratio"] == round(slow / 10, 4)
    assert report.inputs["round_ratios"] == [round((slow + 30) / 10, 4), round(slow / 10, 4), round(slow / 14, 4)]
    assert report.inputs["extra_memory_kb"] == 3000 and report.inputs["reference_extra_memory_kb"] == 2000
    assert report.reason == ""


def test_sixteen_times_the_reference_memory_scores_zero_memory():
    runs = Runs([NOOP, run("reference", 0, 10.0, 11_000), run("candidate", 0, 10.0, 10_000 + 16 * 2048)])
    report = against_reference(runs, None)
    assert (report.time_score, report.memory_score, report.score) == (1.0, 0.0, 0.7)


def test_a_steeper_slope_than_the_reference_costs_the_complexity_factor():
    sizes = [10, 100, 1000]
    records = [NOOP, run("reference", 0, 10.0, 10_000), run("candidate", 0, 10.0, 10_000)]
    for n in sizes:  # above the 5 ms floor: the reference costs n ms, the candidate n*n/10 ms (slopes 1 and 2)
        records += [run("reference", 0, 5.0 + n, 10_000, point=f"n={n}"),
                    run("candidate", 0, 5.0 + n * n / 10, 10_000, point=f"n={n}")]
    report = against_reference(Runs(records), sizes)
    cx = report.inputs["complexity"]
    assert (cx["candidate_slope"], cx["reference_slope"]) == (2.0, 1.0)
    assert report.complexity_factor == pytest.approx(1 - 0.7 / 1.2)  # excess 1: 0.7 past the free 0.3, of 1.2
    assert report.score == pytest.approx(1 - 0.7 / 1.2, abs=1e-6)


def test_answers_that_differ_from_the_reference_at_a_size_zero_the_factor():
    records = [NOOP, run("reference", 0, 10.0, 10_000), run("candidate", 0, 10.0, 10_000)]
    for n in (10, 20, 40):
        records += [run("reference", 0, 6.0, 10_000, point=f"n={n}"),
                    run("candidate", 0, 6.0, 10_000, point=f"n={n}", digests="other" if n == 40 else "d")]
    report = against_reference(Runs(records), [10, 20, 40])
    assert (report.complexity_factor, report.score) == (0.0, 0.0)
    assert report.reason == "answers at n=40 differ from the reference's (or between rounds)"


@pytest.mark.parametrize(("records", "score", "reason"), [
    ([NOOP, run("reference", 0, 10.0, 1), run("candidate", 0, 999.0, 1, status="timeout")], 0.0,
     "the candidate timed out while being measured"),
    ([NOOP, run("reference", 0, 10.0, 1, status="runtime_error"), run("candidate", 0, 10.0, 1)], None,
     "not measurable: reference run at tests ended runtime_error"),
    ([NOOP, run("reference", 0, 10.0, 1), run("candidate", 0, 10.0, 1, passed=False)], None,
     "not measurable: candidate run at tests ended ok, tests failed"),
])
def test_a_timeout_scores_zero_and_a_failed_run_is_not_measurable(records, score, reason):
    report = against_reference(Runs(records), None)
    assert (report.score, report.reason) == (score, reason)


@pytest.mark.parametrize(("cpu_ms", "extra_kb", "t", "m"), [
    (500.0, 16_384, 0.75, 0.75),  # a quarter of 2 cases x 1 s; a quarter of 64 MiB
    (0.0, 0, 1.0, 1.0),
    (3000.0, 70_000, 0.0, 0.0),  # over budget: clipped to 0
])
def test_without_a_reference_the_candidate_is_scored_against_its_limits(cpu_ms, extra_kb, t, m):
    runs = Runs([NOOP, run("candidate", 0, cpu_ms, 10_000 + extra_kb)])
    report = against_limits(runs, timeout_s=1.0, memory_mb=64)
    assert (report.time_score, report.memory_score) == (pytest.approx(t), pytest.approx(m))
    assert report.score == pytest.approx(0.7 * t + 0.3 * m)
    assert report.inputs["cpu_budget_ms"] == 2000.0 and report.inputs["memory_limit_kb"] == 65536


def test_against_limits_a_timeout_scores_zero():
    runs = Runs([NOOP, run("candidate", 0, 999.0, 10_000, status="timeout")])
    assert against_limits(runs, 1.0, 64).score == 0.0
