"""Prompts with real tests for the PPO loop: a small generated family, or any JSONL file of {prompt, tests}.

The generated family asks for one-line integer functions named in a comment. As in HumanEval, the prompt is the
start of the program and the completion finishes it:

    prompt      "def f(x):\n    # double\n    return"
    completion  " x * 2\n"
    tests       rewardbox `function` tests on five inputs

`demonstration` writes what a weak demonstrator would: the right expression only some of the time, otherwise the
expression of another task of the family. Supervised warm-start on such demonstrations teaches the format and some
of the mapping, and leaves the rest for the reward (the tests) to teach.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FUNCTIONS = {
    "double": "x * 2", "triple": "x * 3", "square": "x * x", "cube": "x ** 3", "negate": "-x",
    "increment": "x + 1", "decrement": "x - 1", "halve": "x // 2", "identity": "x", "zero": "0",
    "absolute value": "abs(x)", "is even": "x % 2 == 0", "is positive": "x > 0", "plus ten": "x + 10",
    "times ten": "x * 10", "remainder by three": "x % 3",
}
INPUTS = (0, 1, 2, 5, -3)


@dataclass(frozen=True)
class Task:
    prompt: str
    tests: dict[str, Any]  # a rewardbox `tests` object
    solution: str | None = None  # a right completion, where one is known


def completion(expression: str) -> str:
    return f" {expression}\n"


def named_function_task(name: str) -> Task:
    expression = FUNCTIONS[name]
    cases = [{"args": [x], "expected": eval(expression, {}, {"x": x})} for x in INPUTS]  # our own constants
    return Task(prompt=f"def f(x):\n    # {name}\n    return",
                tests={"kind": "function", "entry_point": "f", "cases": cases}, solution=completion(expression))


def named_function_tasks() -> list[Task]:
    """The family's 16 tasks."""
    return [named_function_task(name) for name in FUNCTIONS]


def demonstration(name: str, rng: random.Random, p_right: float = 0.5) -> str:
    """A weak demonstrator's completion for the task `name`: right with probability p_right, else another's."""
    if rng.random() < p_right:
        return completion(FUNCTIONS[name])
    return completion(FUNCTIONS[rng.choice([other for other in FUNCTIONS if other != name])])


def demonstrations(n: int, seed: int = 0, p_right: float = 0.5) -> list[tuple[str, str]]:
    """n (prompt, completion) pairs from a demonstrator right with probability p_right (0.5: the weak one of the
    student's warm start; higher: the teacher's), for supervised training."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        name = rng.choice(list(FUNCTIONS))
        pairs.append((named_function_task(name).prompt, demonstration(name, rng, p_right)))
    return pairs


def load_tasks(path: str | Path) -> list[Task]:
    """A JSONL file, one {"prompt": ..., "tests": {...}} object a line (the tests as rewardbox takes them)."""
    tasks = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            tasks.append(Task(prompt=row["prompt"], tests=row["tests"], solution=row.get("solution")))
    return tasks
