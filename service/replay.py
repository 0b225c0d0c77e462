"""Replay a stored rollout and say what changed: status, reward, components, per-test verdicts, output."""

from __future__ import annotations

from typing import Any

COMPARED = ("status", "reward")


def diff_results(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key in COMPARED:
        if old.get(key) != new.get(key):
            changes[key] = {"stored": old.get(key), "replayed": new.get(key)}
    components = {}
    for name in set(old.get("components") or {}) | set(new.get("components") or {}):
        a, b = (old.get("components") or {}).get(name), (new.get("components") or {}).get(name)
        if a != b:
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
