"""The client's request bodies (rewardbox/encoding.py): with orjson or without, the same JSON values as httpx's own
json.dumps would send, and the same refusals (NaN and infinities: ValueError; what is not JSON: TypeError)."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardbox import encoding


def reference(value: object) -> bytes:
    """What httpx writes for json=value."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def outcome(encode, value: object) -> object:
    try:
        return json.loads(encode(value))
    except (ValueError, TypeError) as e:
        return type(e)


@pytest.fixture(params=["orjson", "stdlib"])
def encode(request, monkeypatch):
    if request.param == "stdlib":
        monkeypatch.setattr(encoding, "orjson", None)
    else:
        assert encoding.orjson is not None  # the server's environment has it: the fast path is the one tested
    return encoding.encode


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(-5, 5), inner, max_size=4),
    max_leaves=20)


@given(value=json_values)
def test_same_value_or_same_refusal_as_httpx(value):
    for fast in (True, False):
        saved = encoding.orjson
        if not fast:
            encoding.orjson = None  # type: ignore[assignment]
        try:
            assert outcome(encoding.encode, value) == outcome(reference, value)
        finally:
            encoding.orjson = saved


@pytest.mark.parametrize("value", [float("nan"), [1.0, float("inf")], {"cases": [{"expected": -math.inf}]},
                                   (float("nan"),)])
def test_non_finite_floats_are_refused_not_sent_as_null(encode, value):
    with pytest.raises(ValueError):
        encode(value)


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


class Text(str):
    pass


@pytest.mark.parametrize("value", [Color.RED, uuid.UUID(int=7), Point(1), object(), {"k": Color.RED}])
def test_what_json_dumps_refuses_is_refused(encode, value):
    with pytest.raises(TypeError):
        encode(value)


@pytest.mark.parametrize("value", [{1: "a", None: 2, 2.5: 3}, {False: 0}, 2**70, Text("x"), {"a": (1, 2)},
                                   "é\u2028\x00"])
def test_what_only_json_dumps_writes_comes_out_as_it_writes_it(encode, value):
    assert encode(value) == reference(value)


def test_a_lone_surrogate_is_refused_as_before(encode):
    with pytest.raises(UnicodeEncodeError):
        encode({"code": "\ud800"})
