"""Exact, plain-data codec for values crossing the candidate <-> judge channel (stdlib only).

JSON loses tuples, sets, non-string dict keys, big ints, bytes and non-finite floats; pickle executes code.
Here every value is a tagged JSON list and decoding only ever builds builtin types, so an object whose
``__eq__`` always agrees cannot cross: it is rejected by the encoder, and a forged encoding decodes to plain data.
"""

from __future__ import annotations

import base64

MAX_DEPTH = 200
MAX_ITEMS = 1_000_000


class Unencodable(TypeError):
    """The value is not plain data (or is too deep / too large)."""


def encode(value: object) -> object:
    budget = [MAX_ITEMS]
    return _enc(value, 0, budget)


def _enc(v: object, depth: int, budget: list[int]) -> object:
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise Unencodable("value too large")
    t = type(v)
    if v is None:
        return ["n"]
    if t is bool:
        return ["b", v]
    if t is int:
        return ["i", str(v)]
    if t is float:
        return ["f", repr(v)]
    if t is str:
        return ["s", v]
    if t is bytes:
        return ["y", base64.b64encode(v).decode()]
    if t is complex:
        return ["c", repr(v.real), repr(v.imag)]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "l", tuple: "t", set: "S", frozenset: "F"}[t]
        return [tag, [_enc(x, depth + 1, budget) for x in v]]
    if t is dict:
        return ["d", [[_enc(k, depth + 1, budget), _enc(x, depth + 1, budget)] for k, x in v.items()]]
    raise Unencodable(f"{t.__module__}.{t.__qualname__} is not plain data")


_CONTAINERS = {"l": list, "t": tuple, "S": set, "F": frozenset}


def decode(obj: object) -> object:
    budget = [MAX_ITEMS]
    return _dec(obj, 0, budget)


def _dec(o: object, depth: int, budget: list[int]) -> object:
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise Unencodable("value too large")
    if type(o) is not list or not o or type(o[0]) is not str:
        raise Unencodable("malformed encoding")
    tag = o[0]
    if tag == "n" and len(o) == 1:
        return None
    if len(o) == 2:
        p = o[1]
        if tag == "b" and type(p) is bool:
            return p
        if tag == "i" and type(p) is str and len(p) <= 5000:
            return int(p)
        if tag == "f" and type(p) is str and len(p) <= 40:
            return float(p)
        if tag == "s" and type(p) is str:
            return p
        if tag == "y" and type(p) is str:
            return base64.b64decode(p, validate=True)
        if tag in _CONTAINERS and type(p) is list:
            items = [_dec(x, depth + 1, budget) for x in p]
            return _CONTAINERS[tag](items)
        if tag == "d" and type(p) is list:
            out = {}
            for pair in p:
                if type(pair) is not list or len(pair) != 2:
                    raise Unencodable("malformed dict entry")
                out[_dec(pair[0], depth + 1, budget)] = _dec(pair[1], depth + 1, budget)
            return out
    if tag == "c" and len(o) == 3 and type(o[1]) is str and type(o[2]) is str:
        return complex(float(o[1]), float(o[2]))
    raise Unencodable(f"malformed encoding with tag {tag!r}")
