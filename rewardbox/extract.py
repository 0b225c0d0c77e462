"""Pull the program out of a model response: the last fenced python (or bare) code block.

Two conventions meet here. Chat models answer in prose around a fenced block: the program is the last block.
Completion-style prompts (HumanEval, trainer/tasks.py) end inside the program and the completion finishes it: the
program is prompt + completion. `program_of` applies both the way trainer/ppo.py does.
"""

from __future__ import annotations

import re

FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
# What a response with no program earns: CodeRL scores it as a syntax error, every other profile as nothing passed.
NO_CODE_REWARD = {"coderl": -1.0}


def extract_code(response: str, prompt: str | None = None) -> str | None:
    """None when the response holds no fenced block. A leading prompt (OpenRLHF queries) is stripped first."""
    if prompt and response.startswith(prompt):
        response = response[len(prompt):]
    blocks = [m.group(2) for m in FENCE.finditer(response)]
    return blocks[-1] if blocks else None


def program_of(prompt: str | None, completion: str) -> str:
    """The last fenced block when the completion has one, else prompt + completion (a continuation), else the
    completion itself (no text prompt to continue, e.g. a chat conversation)."""
    code = extract_code(completion)
    if code is not None:
        return code
    return (prompt or "") + completion


def no_code_reward(profile: str) -> float:
    return NO_CODE_REWARD.get(profile, 0.0)
