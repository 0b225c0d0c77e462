"""Reward aggregation (service/reward.py), table-tested: every profile, clipping, the flag penalty, and the
ordering guarantee (passing every test beats not passing, under seed and gated) over random components."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.models import Weights
from service.reward import aggregate, components_needed, weights_for

W = {"executability": 0.4, "pass_rate": 0.35, "quality": 0.15, "efficiency": 0.1}  # the defaults


def parts(executability: float | None, pass_rate: float | None, quality: float | None = None,
          efficiency: float | None = None) -> dict[str, float | None]:
    return {"executability": executability, "pass_rate": pass_rate, "quality": quality, "efficiency": efficiency}


@pytest.mark.parametrize(("profile", "weights", "components", "status", "all_passed", "expected"), [
    # seed, passing: the plain weighted sum .4 + .35 + .15*.6 + .1*.5
    ("seed", W, parts(1, 1, 0.6, 0.5), "passed", True, 0.89),
    # seed, not passing: (.4 + .35*.6 + .15*1 + 0) / 1 * .75 * .99 = .76 * .7425
    ("seed", W, parts(1, 0.6, 1.0, None), "failed", False, 0.5643),
    # gated, not passing: quality and efficiency count for nothing: (.4 + .35*.6) / .75 * .75 * .99
    ("gated", W, parts(1, 0.6, 1.0, 1.0), "failed", False, 0.6039),
    # gated, passing: as seed
    ("gated", W, parts(1, 1, 0.6, 0.5), "passed", True, 0.89),
    # components outside 0..1 are clipped, a null one counts 0: .4*1 + .35*1 + .15*0 + .1*0
    ("seed", W, parts(1.5, 1, -0.2, None), "passed", True, 0.75),
    # custom weights, not passing: (1*1 + 1*.5) / 2 * 2 * .99
    ("seed", {"executability": 1.0, "pass_rate": 1.0, "quality": 0.0, "efficiency": 0.0}, parts(1, 0.5),
     "failed", False, 1.485),
    ("binary", None, parts(1, 1), "passed", True, 1.0),
    ("binary", None, parts(1, 0.9), "failed", False, 0.0),
    ("pass_rate", None, parts(1, 0.25), "failed", False, 0.25),
    ("pass_rate", None, parts(0, None), "runtime_error", False, 0.0),
    ("coderl", None, parts(1, 1), "passed", True, 1.0),
    ("coderl", None, parts(1, 0.5), "failed", False, -0.3),
    ("coderl", None, parts(0, 0), "syntax_error", False, -1.0),
    ("coderl", None, parts(0, 0), "patch_error", False, -1.0),
    ("coderl", None, parts(0, 0), "runtime_error", False, -0.6),
    ("coderl", None, parts(0, 0), "timeout", False, -0.6),
    ("coderl", None, parts(0, 0), "memory_limit", False, -0.6),
])
def test_each_profile_turns_components_into_its_reward(profile, weights, components, status, all_passed, expected):
    assert aggregate(profile, weights, components, status, all_passed, flagged=False, flag_penalty=0.5) == expected


@pytest.mark.parametrize(("profile", "weights", "flagged", "expected"), [
    ("binary", None, True, 0.75),
    ("binary", None, False, 1.0),
    ("seed", W, True, 0.64),  # .89 - .25
    ("coderl", None, True, 0.75),
])
def test_the_flag_penalty_is_subtracted_only_from_a_flagged_program(profile, weights, flagged, expected):
    assert aggregate(profile, weights, parts(1, 1, 0.6, 0.5), "passed", True, flagged, 0.25) == expected


def test_a_reward_is_rounded_to_six_decimals():
    # (.4 + .35 * .123456789) * .7425 = 0.329083333..., given as 0.329083
    assert aggregate("seed", W, parts(1, 0.123456789), "failed", False, False, 0.0) == 0.329083


@pytest.mark.parametrize(("profile", "weights", "expected"), [
    ("binary", None, {"executability", "pass_rate"}),
    ("coderl", None, {"executability", "pass_rate"}),
    ("seed", W, {"executability", "pass_rate", "quality", "efficiency"}),
    ("seed", {**W, "quality": 0.0}, {"executability", "pass_rate", "efficiency"}),
])
def test_a_component_of_weight_zero_is_never_computed(profile, weights, expected):
    assert components_needed(profile, weights) == expected


def test_weights_exist_only_for_the_weighted_profiles():
    assert weights_for("binary", Weights()) is None
    assert weights_for("pass_rate", None) is None
    assert weights_for("seed", None) == W
    assert weights_for("gated", Weights(quality=0.0)) == {**W, "quality": 0.0}


unit = st.floats(0, 1)
weight = st.floats(0, 100)


@given(profile=st.sampled_from(["seed", "gated"]), e=weight, p=weight, q=weight, f=weight,
       passing=st.tuples(unit, unit), failing=st.tuples(unit, st.floats(0, 0.999), unit, unit))
def test_passing_every_test_outscores_any_program_that_does_not(profile, e, p, q, f, passing, failing):
    if e + p < 1e-4:  # the documented range of the guarantee (validation refuses e + p = 0)
        return
    weights = {"executability": e, "pass_rate": p, "quality": q, "efficiency": f}
    best_failing = aggregate(profile, weights, parts(*failing), "failed", False, False, 0.0)
    worst_passing = aggregate(profile, weights, parts(1, 1, *passing), "passed", True, False, 0.0)
    assert worst_passing > best_failing
