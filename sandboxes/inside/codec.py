"""Exact, plain-data codec for values crossing the candidate <-> judge channel (stdlib only).

JSON loses tuples, sets, non-string dict keys, big ints, bytes and non-finite floats; pickle executes code.
Here every value is a tagged JSON list and decoding only ever builds builtin types, so an object whose
``__eq__`` always agrees cannot cross: it is rejected by the encoder, and a forged encoding decodes to plain data.

Ints of up to DECIMAL_DIGITS digits travel in decimal ("i"); bigger ones in hexadecimal ("h"), which Python converts
in linear time and without the interpreter's 4,300-digit limit on decimal conversion (a correct answer with
100,000 digits must reach the judge). One more tag exists only on the way *to* the candidate: "r", a reference to
one of the candidate's own names (a test passing the program's function to the program); the judge never decodes
it (``decode`` without ``resolve`` rejects it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable

TYPE_CHECKING = False  # for the checker only: the code run in the sandbox never imports typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 200
MAX_ITEMS = 1_000_000
DECIMAL_DIGITS = 4000  # below the interpreter's default int/str conversion limit (4,300 digits)
MAX_HEX_DIGITS = 2_000_000  # an 8-million-bit int; more is not an answer but a flood


class Unencodable(TypeError):
    """The value is not plain data (or is malformed)."""


class TooLarge(Unencodable):
    """Plain data, but nested too deeply or with too many items to cross."""


def encode(value: object, ref: Callable[[object], str | None] | None = None) -> object:
    """ref(v) may name a value that stands for one of the candidate's own names (the judge's Remote)."""
    budget = [MAX_ITEMS]
    return _enc(value, 0, budget, ref)


def _enc(v: Any, depth: int, budget: list[int], ref) -> object:  # Any: dispatched on its exact type below
    if depth > MAX_DEPTH:
        raise TooLarge("value nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge("value too large")
    t = type(v)
    if v is None:
        return ["n"]
    if t is bool:
        return ["b", v]
    if t is int:
        if v.bit_length() <= DECIMAL_DIGITS * 3:  # < 10 ** 3612: decimal is safe
            return ["i", str(v)]
        return ["h", format(v, "x")]
    if t is float:
        return ["f", repr(v)]
    if t is str:
        return ["s", v]
    if t is bytes:
        return ["y", base64.b64encode(v).decode()]
    if t is complex:
        return ["c", repr(v.real), repr(v.imag)]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = _TAGS[t]
        return [tag, [_enc(x, depth + 1, budget, ref) for x in v]]
    if t is dict:
        return ["d", [[_enc(k, depth + 1, budget, ref), _enc(x, depth + 1, budget, ref)] for k, x in v.items()]]
    name = ref(v) if ref is not None else None
    if name is not None:
        return ["r", name]
    raise Unencodable(f"{t.__module__}.{t.__qualname__} is not plain data")


_CONTAINERS: dict[str, type] = {"l": list, "t": tuple, "S": set, "F": frozenset}
_TAGS = {container: tag for tag, container in _CONTAINERS.items()}


def decode(obj: object, resolve: Callable[[str], object] | None = None) -> object:
    """resolve(name) turns an "r" reference into the candidate's own object (candidate side only)."""
    budget = [MAX_ITEMS]
    return _dec(obj, 0, budget, resolve)


def _dec(o: object, depth: int, budget: list[int], resolve) -> object:
    if depth > MAX_DEPTH:
        raise TooLarge("value nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge("value too large")
    if type(o) is not list or not o or type(o[0]) is not str:
        raise Unencodable("malformed encoding")
    tag = o[0]
    if tag == "n" and len(o) == 1:
        return None
    if len(o) == 2:
        p = o[1]
        if tag == "b" and type(p) is bool:
            return p
        if tag == "i" and type(p) is str and len(p) <= DECIMAL_DIGITS + 1:
            return int(p)
        if tag == "h" and type(p) is str and len(p) <= MAX_HEX_DIGITS + 1:
            return int(p, 16)
        if tag == "f" and type(p) is str and len(p) <= 40:
            return float(p)
        if tag == "s" and type(p) is str:
            return p
        if tag == "y" and type(p) is str:
            return base64.b64decode(p, validate=True)
        if tag in _CONTAINERS and type(p) is list:
            items = [_dec(x, depth + 1, budget, resolve) for x in p]
            return _CONTAINERS[tag](items)
        if tag == "d" and type(p) is list:
            out = {}
            for pair in p:
                if type(pair) is not list or len(pair) != 2:
                    raise Unencodable("malformed dict entry")
                out[_dec(pair[0], depth + 1, budget, resolve)] = _dec(pair[1], depth + 1, budget, resolve)
            return out
        if tag == "r" and type(p) is str and resolve is not None:
            return resolve(p)
    if tag == "c" and len(o) == 3 and type(o[1]) is str and type(o[2]) is str:
        return complex(float(o[1]), float(o[2]))
    raise Unencodable(f"malformed encoding with tag {tag!r}")
