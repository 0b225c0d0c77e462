"""Dashboard summaries compared as data: SQL and Python sum floats in different orders, so floats are rounded."""

from __future__ import annotations

import dataclasses
from typing import Any


def rounded(summary: Any) -> dict:
    """The summary (a dataclass) as plain data, its floats rounded to 9 places."""
    def walk(x: Any) -> Any:
        if isinstance(x, float):
            return round(x, 9)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        return [walk(v) for v in x] if isinstance(x, list) else x
    return walk(dataclasses.asdict(summary))
