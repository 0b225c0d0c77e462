"""Reward profiles: how component scores become one number a PPO/GRPO step can use.

E, P, Q, F are the weights of executability, pass rate, quality and efficiency (default 0.4, 0.35, 0.15, 0.1:
executability weighs most, then pass rate, then the two auxiliary components), W their sum, T = E + P.
- seed (default): a program that passes every test gets the weighted sum E + P + Q*quality + F*efficiency.
  One that does not gets its weighted sum scaled below T, the least a passing program can get:
      (E*executability + P*pass_rate + Q*quality + F*efficiency) / W * T * (1 - MARGIN)
  The components keep their order among such programs, and a program that passes every test always
  outscores one that does not, on the same item (a wrong but tidy program can never beat a right but slow,
  badly formatted one: tests/test_reward_ordering.py checks it over random components and weights).
- gated: as seed when every test passes; otherwise quality and efficiency add nothing:
      (E*executability + P*pass_rate) * (1 - MARGIN)
- binary: 1 if every test passes, else 0 (only execution is paid for).
- pass_rate: the fraction of tests passed (verl's sandbox_fusion scorer; only execution is paid for).
- coderl: -1 syntax error (or a repo item's patch that does not apply), -0.6 runtime error (timeouts and resource
  limits included), -0.3 failed tests, +1 all pass (CodeRL's shaping).
The best a program that fails some test can reach (default weights; efficiency is measured only for programs
that pass every test, so it is null, 0, for the others), next to the least a passing program gets:
    profile   best non-solving (sup)               stub passing no test        least passing
    seed      0.99 * 0.75 * 0.90 -> 0.668          0.99 * 0.75 * 0.55 = 0.408  0.75
    gated     0.99 * 0.75        -> 0.7425         0.99 * 0.40        = 0.396  0.75
    binary    0                                    0                           1
    coderl    -0.3                                 -0.3                        1
(sup: approached as the pass rate nears 1, never reached). Under seed and gated, E + P must be > 0 (validated
in service/models.py), and the guarantee holds to the 6 decimals a reward is given in while E + P >= 1e-4.
A null component contributes 0; weights are never renormalised, so an unmeasured component can never inflate
a reward. An optional flag_penalty is subtracted when the program raised any suspicious-construct flag (the
ordering above holds between programs with the same flags).
"""

from __future__ import annotations

from service.models import COMPONENTS, Weights

DEFAULT_WEIGHTS = Weights().as_dict()
WEIGHTED = ("seed", "gated")
CODERL = {"passed": 1.0, "failed": -0.3, "syntax_error": -1.0, "patch_error": -1.0}  # a diff that does not apply
CODERL_OTHERWISE = -0.6
MARGIN = 0.01  # how far below the least passing reward the best non-solving one stays (a share of E + P)
AUXILIARY = ("quality", "efficiency")


def weights_for(profile: str, weights: Weights | None) -> dict[str, float] | None:
    if profile not in WEIGHTED:
        return None
    return weights.as_dict() if weights else dict(DEFAULT_WEIGHTS)


def components_needed(profile: str, weights: dict[str, float] | None) -> set[str]:
    """Components worth computing: a zero-weight component is never run (binary pays only for execution)."""
    if weights is None:
        return {"executability", "pass_rate"}
    return {c for c in COMPONENTS if weights[c] > 0}


def aggregate(
    profile: str,
    weights: dict[str, float] | None,
    components: dict[str, float | None],
    status: str,
    all_passed: bool,
    flagged: bool,
    flag_penalty: float,
) -> float:
    if profile == "binary":
        reward = 1.0 if all_passed else 0.0
    elif profile == "pass_rate":
        reward = components.get("pass_rate") or 0.0
    elif profile == "coderl":
        reward = CODERL.get("passed" if all_passed else status, CODERL_OTHERWISE)
    else:
        assert weights is not None
        reward = weighted(profile, weights, components, all_passed)
    if flagged:
        reward -= flag_penalty
    return round(reward, 6)


def weighted(profile: str, weights: dict[str, float], components: dict[str, float | None], all_passed: bool) -> float:
    """seed and gated (see the module docstring)."""
    counted = COMPONENTS if profile == "seed" or all_passed else tuple(c for c in COMPONENTS if c not in AUXILIARY)
    raw = sum(weights[c] * _clip(components.get(c)) for c in counted)
    if all_passed:
        return raw
    floor = weights["executability"] + weights["pass_rate"]  # the least a passing program gets
    total = sum(weights[c] for c in counted)
    return raw / total * floor * (1 - MARGIN) if total > 0 else 0.0


def _clip(value: float | None) -> float:
    return min(1.0, max(0.0, value or 0.0))
