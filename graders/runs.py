"""What a test-kind runner is given: one program, its tests, and where to run them.

A runner is the coroutine that runs one kind of tests (`io`, `assert`, `rust_test`, ...) and returns the Outcome;
graders/tests.py (Python) and graders/compiled.py (the other languages) each keep a table kind -> runner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sandboxes import Limits
from sandboxes.builds import Builder, JobRunner
from sandboxes.languages import Language

from .outcome import Outcome


@dataclass(frozen=True)
class ProgramRun:
    pool: JobRunner  # a pool, or anything that runs a Job as a pool does (the item's budget, the fair pool)
    language: Language
    code: str
    tests: Any  # a service.models test spec, or None: run the program once
    limits: Limits
    builder: Builder | None = None  # compiled artefacts, cached by the caller (every language but Python)
    compile_timeout_s: float = 30.0
    account: bool = False  # Python: the outcome carries the runner's accounting of the stage (Outcome.usage)

    @property
    def kind(self) -> str | None:
        return getattr(self.tests, "kind", None)

    @property
    def case_names(self) -> list[str]:
        """The verdict names of the cases (io and function tests), for outcomes that end before any case ran."""
        return [f"case {i}" for i in range(len(getattr(self.tests, "cases", None) or []))]


Runner = Callable[[ProgramRun], Awaitable[Outcome]]
