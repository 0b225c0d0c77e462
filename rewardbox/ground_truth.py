"""Turn the test formats of common RL datasets into rewardbox `tests` objects.

Accepted, as a dict or as its JSON text (JSON text is the safe way to store tests in a dataset column):
- a rewardbox tests object: {"kind": "assert" | "function" | "io" | "pytest" | "rust_test", ...};
- verl / PRIME ground truth: {"inputs", "outputs", "fn_name"?} or {"assert_case": [...]};
- open-r1 `verification_info`: {"language", "test_cases": [{"input", "output", "type": "stdin_stdout"}]};
- a reward item without `code` ({"tests": {...}, "profile": ..., "limits": ...}), via `item_fields`.
A dataset column of dicts goes through Arrow, which merges dicts of different kinds into one struct and fills the
keys a row lacks with null: such null-filled keys are dropped before reading (every optional field of a tests
object means the same when null as when absent). Values inside `args`, `kwargs` and `expected` are left alone.
"""

from __future__ import annotations

import json
from typing import Any

CASE_LISTS = ("cases", "test_cases")  # lists of case objects whose null-filled keys are dropped too
NESTED = ("scaling", "compare")  # nested objects of a tests object


def plain(value: Any) -> Any:
    """numpy arrays and scalars (what a parquet column of dicts reads back as, e.g. in verl) -> lists and numbers."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain(value.tolist())
    return value


def _loads(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return plain(value)
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON ({e.msg} at {e.pos})") from None


def drop_nulls(spec: dict[str, Any]) -> dict[str, Any]:
    """Undo Arrow's null filling: the keys of a tests object (and of its cases) whose value is null."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if value is None:
            continue
        if key in CASE_LISTS and isinstance(value, list):
            value = [{k: v for k, v in c.items() if v is not None} if isinstance(c, dict) else c for c in value]
        elif key in NESTED and isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    return out


def from_verification_info(info: dict[str, Any] | str) -> dict[str, Any]:
    """open-r1: {"language", "test_cases": [{"input", "output", "type": "stdin_stdout"}]} -> io tests."""
    info = drop_nulls(_loads(info, "verification_info"))
    cases = []
    for i, case in enumerate(info["test_cases"]):
        kind = case.get("type", "stdin_stdout")
        if kind != "stdin_stdout":
            raise ValueError(f"test_cases[{i}].type: {kind!r} is not supported (only stdin_stdout)")
        if not isinstance(case.get("output"), str):  # a missing output would silently expect "": nothing to compare
            raise ValueError(f"test_cases[{i}].output: expected output text, got {type(case.get('output')).__name__}")
        cases.append({"stdin": case.get("input", ""), "stdout": case["output"]})
    return {"kind": "io", "cases": cases}


def from_verl(ground_truth: dict[str, Any] | str) -> dict[str, Any]:
    """Any accepted tests format (see the module docstring) -> a rewardbox tests object.
    In verl's fn_name mode an input is one JSON argument per line (or already a list of arguments) and an output is
    the JSON result."""
    gt = _loads(ground_truth, "tests")
    if not isinstance(gt, dict):
        raise ValueError(f"tests must be an object, not {type(gt).__name__}")
    gt = drop_nulls(gt)
    if "kind" in gt:
        return gt
    if "test_cases" in gt:
        return from_verification_info(gt)
    if "assert_case" in gt:
        return {"kind": "assert", "test_code": "\n".join(gt["assert_case"])}
    if "inputs" not in gt or "outputs" not in gt:
        raise ValueError("tests: expected a rewardbox tests object ({'kind': ...}), verl ground truth "
                         "({'inputs', 'outputs'} or {'assert_case'}) or open-r1 verification_info "
                         f"({{'test_cases'}}); got keys {sorted(gt)}")
    inputs, outputs = gt["inputs"], gt["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ValueError("tests.outputs: inputs and outputs must be lists of the same length (one expected output "
                         f"per input), got {_length(inputs)} inputs and {_length(outputs)} outputs")
    if gt.get("fn_name"):
        cases = []
        for given, want in zip(inputs, outputs, strict=True):
            args = given if isinstance(given, list) else [json.loads(line) for line in given.splitlines() if line]
            cases.append({"args": args, "expected": json.loads(want) if isinstance(want, str) else want})
        return {"kind": "function", "entry_point": gt["fn_name"], "cases": cases}
    return {"kind": "io", "cases": [{"stdin": i, "stdout": o} for i, o in zip(inputs, outputs, strict=True)]}


def _length(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else f"a {type(value).__name__}"


def tests_of(value: Any) -> dict[str, Any] | None:
    """Whatever a dataset column holds -> a tests object; None where the row carries no tests (null or "")."""
    if value is None or value == "":
        return None
    return from_verl(value)


def item_fields(value: Any) -> dict[str, Any] | None:
    """A dataset value -> the fields of a reward item other than `code`: {"tests", "language"?, "profile"?, ...}.
    A reward item without code keeps its other fields; open-r1's verification_info brings its language."""
    value = _loads(value, "tests") if value not in (None, "") else None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"tests must be an object, not {type(value).__name__}")
    value = drop_nulls(value)
    if "tests" in value and "kind" not in value:  # a reward item without code
        return {**value, "tests": tests_of(value["tests"])}
    fields: dict[str, Any] = {"tests": from_verl(value)}
    if "test_cases" in value and value.get("language"):
        fields["language"] = value["language"]
    return fields
