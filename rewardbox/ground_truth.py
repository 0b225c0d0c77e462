"""Turn the test formats of common RL datasets into rewardbox `tests` objects."""

from __future__ import annotations

import json
from typing import Any


def from_verification_info(info: dict[str, Any] | str) -> dict[str, Any]:
    """open-r1: {"language", "test_cases": [{"input", "output", "type": "stdin_stdout"}]} -> io tests."""
    info = json.loads(info) if isinstance(info, str) else info
    cases = [{"stdin": c.get("input", ""), "stdout": c.get("output", "")} for c in info["test_cases"]]
    return {"kind": "io", "cases": cases}


def from_verl(ground_truth: dict[str, Any] | str) -> dict[str, Any]:
    """verl / PRIME style: {"inputs", "outputs", "fn_name"?} or {"assert_case": [...]}, possibly as JSON text.
    In fn_name mode an input is one JSON argument per line (or already a list of arguments) and an output is the
    JSON result."""
    gt = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if "kind" in gt:
        return gt
    if "test_cases" in gt:
        return from_verification_info(gt)
    if "assert_case" in gt:
        return {"kind": "assert", "test_code": "\n".join(gt["assert_case"])}
    inputs, outputs = gt["inputs"], gt["outputs"]
    if gt.get("fn_name"):
        cases = []
        for given, want in zip(inputs, outputs, strict=True):
            args = given if isinstance(given, list) else [json.loads(line) for line in given.splitlines() if line]
            cases.append({"args": args, "expected": json.loads(want) if isinstance(want, str) else want})
        return {"kind": "function", "entry_point": gt["fn_name"], "cases": cases}
    return {"kind": "io", "cases": [{"stdin": i, "stdout": o} for i, o in zip(inputs, outputs, strict=True)]}


def tests_of(value: Any) -> dict[str, Any]:
    """Whatever a dataset column holds: a tests object, verl ground truth or open-r1 verification_info."""
    return from_verl(value)
