"""Prompts with real tests for the PPO loop: a small generated family, or any JSONL file of {prompt, tests}.

The generated family ("arithmetic") asks for `f(x)` applying one operation with a one-digit constant:

    prompt      "# f(x): add 7\n"
    solution    "def f(x):\n    return x + 7\n"
    tests       rewardbox `function` tests on five inputs

`demonstration` writes what a weak demonstrator would: the right program only some of the time, otherwise the
right template with a wrong operation or constant. Supervised warm-start on such demonstrations teaches the
format and some of the mapping, and leaves the rest for the reward (the tests) to teach.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPS = {"add": "+", "sub": "-", "mul": "*"}  # same length: every prompt has the same shape
INPUTS = (0, 1, 2, 5, -3)


@dataclass(frozen=True)
class Task:
    prompt: str
    tests: dict[str, Any]  # a rewardbox `tests` object
    solution: str | None = None


def _apply(symbol: str, x: int, k: int) -> int:
    return {"+": x + k, "-": x - k, "*": x * k}[symbol]


def program(symbol: str, k: int) -> str:
    return f"def f(x):\n    return x {symbol} {k}\n"


def arithmetic_task(op: str, k: int) -> Task:
    symbol = OPS[op]
    cases = [{"args": [x], "expected": _apply(symbol, x, k)} for x in INPUTS]
    return Task(prompt=f"# f(x): {op} {k}\n", tests={"kind": "function", "entry_point": "f", "cases": cases},
                solution=program(symbol, k))


def arithmetic_tasks() -> list[Task]:
    """All 30 tasks of the family (3 operations x constants 0-9)."""
    return [arithmetic_task(op, k) for op in OPS for k in range(10)]


def demonstration(op: str, k: int, rng: random.Random, p_right_op: float = 0.9, p_right_k: float = 0.6) -> str:
    """A weak demonstrator's program for the task (op, k): each part right with its own probability."""
    symbol = OPS[op] if rng.random() < p_right_op else rng.choice(list(OPS.values()))
    constant = k if rng.random() < p_right_k else rng.randrange(10)
    return program(symbol, constant)


def demonstrations(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (prompt, completion) pairs from the weak demonstrator, for the supervised warm start."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        op, k = rng.choice(list(OPS)), rng.randrange(10)
        pairs.append((arithmetic_task(op, k).prompt, demonstration(op, k, rng)))
    return pairs


def load_tasks(path: str | Path) -> list[Task]:
    """A JSONL file, one {"prompt": ..., "tests": {...}} object a line (the tests as rewardbox takes them)."""
    tasks = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            tasks.append(Task(prompt=row["prompt"], tests=row["tests"], solution=row.get("solution")))
    return tasks
