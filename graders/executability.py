"""Executability: 1 if the program parses, its top level runs to completion within limits without raising or
exiting, and it defines what the tests call (the entry point); else 0. Binary by design (the product brief)."""

from __future__ import annotations

from .outcome import Outcome


def executability(outcome: Outcome) -> float | None:
    if outcome.ours:
        return None
    return 1.0 if outcome.executable else 0.0
