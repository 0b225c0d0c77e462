"""Replay a stored rollout and say what changed: status, reward, components, per-test verdicts, output.

Two runs of the same deterministic program agree exactly on everything but efficiency, which is a measurement:
its score moves by ~1e-5 between runs on an idle machine and by up to a few hundredths under load (bench/
efficiency_stability.py: score spread 0.007-0.037 over 20 scorings). So a replay is compared with a tolerance per
component, and the reward with the tolerance those components carry into it:

| field | tolerance |
| --- | --- |
| status, per-test verdicts, stdout, stderr | exact |
| executability, pass_rate, quality | exact (1e-9: rounding) |
| efficiency | 0.05 (absolute, on its 0..1 scale) |
| reward | sum over components of weight x tolerance (+ 1e-6, the reward's rounding) |

`identical` is true when everything agrees within tolerance, `diff` lists what does not, and `exact_diff` every
difference however small (with `exact` true when there is none), so a drift inside the tolerance stays visible.
"""

from __future__ import annotations

from typing import Any

from service.models import COMPONENTS

COMPONENT_TOLERANCE = {"executability": 1e-9, "pass_rate": 1e-9, "quality": 1e-9, "efficiency": 0.05}
REWARD_ROUNDING = 1e-6


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    exact = diff_results(old, new, tolerant=False)
    beyond = diff_results(old, new, tolerant=True)
    return {"identical": not beyond, "diff": beyond, "exact": not exact, "exact_diff": exact,
            "tolerances": {**COMPONENT_TOLERANCE, "reward": reward_tolerance(new.get("weights") or old.get("weights"))}}


def reward_tolerance(weights: dict[str, float] | None) -> float:
    """How far measurement noise inside the component tolerances can move the reward."""
    if not weights:  # binary and coderl pay only for execution, which is exact
        return REWARD_ROUNDING
    return sum(abs(weights.get(c, 0.0)) * COMPONENT_TOLERANCE[c] for c in COMPONENTS) + REWARD_ROUNDING


def _differ(a: Any, b: Any, tolerance: float | None) -> bool:
    if tolerance is not None and isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) > tolerance
    return a != b


def diff_results(old: dict[str, Any], new: dict[str, Any], tolerant: bool = False) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if old.get("status") != new.get("status"):
        changes["status"] = {"stored": old.get("status"), "replayed": new.get("status")}
    reward_tol = reward_tolerance(new.get("weights") or old.get("weights")) if tolerant else None
    if _differ(old.get("reward"), new.get("reward"), reward_tol):
        changes["reward"] = {"stored": old.get("reward"), "replayed": new.get("reward")}
    components = {}
    for name in sorted(set(old.get("components") or {}) | set(new.get("components") or {})):
        a, b = (old.get("components") or {}).get(name), (new.get("components") or {}).get(name)
        if _differ(a, b, COMPONENT_TOLERANCE.get(name) if tolerant else None):
            components[name] = {"stored": a, "replayed": b}
    if components:
        changes["components"] = components
    old_tests = {t["name"]: t for t in old.get("tests") or []}
    new_tests = {t["name"]: t for t in new.get("tests") or []}
    tests = {}
    for name in old_tests.keys() | new_tests.keys():
        a, b = old_tests.get(name), new_tests.get(name)
        if (a or {}).get("passed") != (b or {}).get("passed") or (a or {}).get("status") != (b or {}).get("status"):
            tests[name] = {"stored": a and a["status"], "replayed": b and b["status"]}
    if tests:
        changes["tests"] = tests
    for stream in ("stdout", "stderr"):
        a, b = (old.get("execution") or {}).get(stream), (new.get("execution") or {}).get(stream)
        if a != b:
            changes[stream] = {"stored": (a or "")[:500], "replayed": (b or "")[:500]}
    return changes
