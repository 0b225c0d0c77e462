"""Pass rate: passed test cases / all test cases (cases never reached count as failed)."""

from __future__ import annotations

from .outcome import Outcome


def pass_rate(outcome: Outcome) -> float | None:
    if outcome.ours:
        return None
    return outcome.pass_rate
