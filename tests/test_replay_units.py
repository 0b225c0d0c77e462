"""The replay comparison: exact fields, per-component tolerances, the reward's derived tolerance."""

from __future__ import annotations

from service.rollouts.replay import COMPONENT_TOLERANCE, compare, reward_tolerance

WEIGHTS = {"executability": 0.4, "pass_rate": 0.35, "quality": 0.15, "efficiency": 0.1}


def result(efficiency: float | None, reward: float, status: str = "passed", stdout: str = "") -> dict:
    return {"status": status, "reward": reward, "weights": WEIGHTS, "tests": [],
            "components": {"executability": 1.0, "pass_rate": 1.0, "quality": 0.6, "efficiency": efficiency},
            "execution": {"stdout": stdout, "stderr": ""}}


def test_a_measurement_that_moved_within_tolerance_is_identical_and_still_listed():
    out = compare(result(0.90001, 0.93), result(0.90002, 0.930001))
    assert out["identical"] and out["diff"] == {}
    assert not out["exact"] and set(out["exact_diff"]) == {"reward", "components"}


def test_beyond_tolerance_or_an_exact_field_is_different():
    assert not compare(result(0.9, 0.93), result(0.8, 0.92))["identical"]
    assert compare(result(0.9, 0.93), result(0.8, 0.92))["diff"]["components"] == {
        "efficiency": {"stored": 0.9, "replayed": 0.8}}
    assert not compare(result(0.9, 0.93), result(0.9, 0.93, stdout="x"))["identical"]
    assert not compare(result(0.9, 0.93), result(None, 0.84))["identical"]  # measured, then not
    assert not compare(result(0.9, 0.93), result(0.9, 0.93, status="failed"))["identical"]


def test_the_reward_tolerance_is_what_the_component_tolerances_can_move_it():
    assert reward_tolerance(WEIGHTS) == WEIGHTS["efficiency"] * COMPONENT_TOLERANCE["efficiency"] + 1e-6 + sum(
        WEIGHTS[c] * COMPONENT_TOLERANCE[c] for c in ("executability", "pass_rate", "quality"))
    assert reward_tolerance(None) == 1e-6  # binary / coderl: execution only
