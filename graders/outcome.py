"""What running a program against its tests produced: the shared input of every component grader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Item statuses, most to least severe among program failures (used to summarise many runs into one).
FAILURE_ORDER = ("memory_limit", "output_limit", "timeout", "runtime_error")


@dataclass
class Verdict:
    name: str
    passed: bool
    status: str  # passed | failed | timeout | runtime_error | memory_limit | output_limit | not_run
    message: str = ""
    cpu_ms: float | None = None


@dataclass
class Outcome:
    status: str  # passed | failed | syntax_error | runtime_error | timeout | memory_limit | output_limit
    #              | invalid_input | infra_error
    executable: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    message: str = ""
    wall_ms: float = 0.0
    cpu_ms: float = 0.0  # the program's CPU time over all its processes (kernel accounting)
    peak_memory_kb: int = 0
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    # The runner's accounting of the whole tests stage (orphans and files included), when the caller asked for it
    # (run_tests(account=True)): {"cpu_ms", "peak_memory_kb", "complete"}. Efficiency without a reference uses it.
    usage: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ours(self) -> bool:
        """Not a verdict on the program: no reward may be computed from it."""
        return self.status in ("infra_error", "invalid_input")

    @property
    def all_passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)

    @property
    def pass_rate(self) -> float | None:
        if not self.verdicts:
            return None
        return sum(v.passed for v in self.verdicts) / len(self.verdicts)
