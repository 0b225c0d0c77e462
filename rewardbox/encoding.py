"""Request bodies as JSON bytes, the way httpx writes them (UTF-8, compact, NaN and infinities refused), fast.

A GRPO group of io items carries its tests once in `defaults`: megabytes of stdins and expected outputs per request.
The standard library encodes that at ~0.26 s per 65 MB (ensure_ascii=False, the trainer's CPU, on the cores the
sandboxes share when both run on one machine); orjson at ~0.03 s. orjson is used when it is installed (it is with
the server; `pip install orjson` beside the client), and only for what it writes exactly as json.dumps would read
back: plain str, int, float, bool, None, dict, list and tuple. Anything it refuses or would write differently goes
through json.dumps: integers beyond 64 bits, keys that are not strings (json.dumps writes 1 as "1"), subclasses,
enums, UUIDs, dataclasses (json.dumps writes or refuses those as it always did). orjson writes NaN as null, so
non-finite floats are looked for first and refused as json.dumps refuses them (ValueError)."""

from __future__ import annotations

import json
import math
from typing import Any

try:
    import orjson
except ImportError:  # the client alone depends on httpx only
    orjson = None  # type: ignore[assignment]

PLAIN = frozenset({str, int, float, bool, type(None), dict, list, tuple})


def encode(value: Any) -> bytes:
    """value as JSON bytes: UTF-8, no whitespace, ValueError for NaN or an infinity, TypeError for what is not JSON."""
    if orjson is not None and _plain(value):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:
            pass  # json.dumps decides: it writes what orjson refused to (big integers, keys not strings), or raises
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _plain(value: Any) -> bool:
    """Whether value holds only the plain types (exactly, not subclasses: an Enum or a UUID orjson would write and
    json.dumps refuses); ValueError for a non-finite float, which orjson would write as null."""
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is dict:
            stack.extend(v.values())
        elif kind is list or kind is tuple:
            stack.extend(v)
        elif kind is float:
            if not math.isfinite(v):
                raise ValueError(f"Out of range float values are not JSON compliant: {v!r}")
        elif kind not in PLAIN:
            return False
    return True
