"""Reward profiles: how component scores become one number a PPO/GRPO step can use.

- seed (default): weighted sum, executability weighted highest, then pass rate, quality, efficiency.
- gated: executability and pass rate as in seed; quality and efficiency add only when every test passes.
- binary: 1 if every test passes, else 0 (only execution is paid for).
- coderl: -1 syntax error (or a repo item's patch that does not apply), -0.6 runtime error (timeouts and resource
  limits included), -0.3 failed tests, +1 all pass (CodeRL's shaping).
A null component contributes 0; weights are never renormalised, so an unmeasured component can never inflate
a reward. An optional flag_penalty is subtracted when the program raised any suspicious-construct flag.
"""

from __future__ import annotations

from .models import COMPONENTS, Weights

DEFAULT_WEIGHTS = Weights().as_dict()
WEIGHTED = ("seed", "gated")
CODERL = {"passed": 1.0, "failed": -0.3, "syntax_error": -1.0, "patch_error": -1.0}  # a diff that does not apply
CODERL_OTHERWISE = -0.6


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
    elif profile == "coderl":
        reward = CODERL.get("passed" if all_passed else status, CODERL_OTHERWISE)
    else:
        assert weights is not None
        gated_out = profile == "gated" and not all_passed
        reward = sum(
            weights[c] * (components.get(c) or 0.0)
            for c in COMPONENTS
            if not (gated_out and c in ("quality", "efficiency"))
        )
    if flagged:
        reward -= flag_penalty
    return round(reward, 6)
