"""Pull the program out of a model response: the last fenced python (or bare) code block."""

from __future__ import annotations

import re

FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(response: str, prompt: str | None = None) -> str | None:
    """None when the response holds no fenced block. A leading prompt (OpenRLHF queries) is stripped first."""
    if prompt and response.startswith(prompt):
        response = response[len(prompt):]
    blocks = [m.group(2) for m in FENCE.finditer(response)]
    return blocks[-1] if blocks else None
