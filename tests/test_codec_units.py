"""The candidate <-> judge codec (sandboxes/inside/codec.py): every plain value comes back equal and of the same
type, edge values included; anything else is refused on the way in, and a forged encoding decodes to plain data
or is refused."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandboxes.inside.codec import DECIMAL_DIGITS, MAX_DEPTH, TooLarge, Unencodable, decode, encode

hashable = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
    | st.complex_numbers(allow_nan=False),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=4),
    max_leaves=10,
)
plain = st.recursive(
    hashable,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner) | st.sets(hashable, max_size=4)
    | st.dictionaries(hashable, inner, max_size=4),
    max_leaves=20,
)


def same(a: object, b: object) -> bool:
    """Equal and of the same type all the way down (1 == 1.0 == True, and a codec must not blur them)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)  # type: ignore[attr-defined,index]
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)  # type: ignore[arg-type]
    return a == b


@given(plain)
def test_plain_data_round_trips_with_its_types(value):
    assert same(decode(encode(value)), value)


@pytest.mark.parametrize("value", [
    True, False, 0, -1, 2**63, -(2**64) - 1,
    10 ** (DECIMAL_DIGITS - 1), 10**5000, -(10**100_000),  # past the interpreter's 4,300-digit str() limit
    0.0, -0.0, 5e-324, 1.7976931348623157e308, math.inf, -math.inf,
    "", "\x00", "\ud800", "é" * 3, b"", b"\x00\xff", complex(-0.0, math.inf),
    (), (1,), [[]], {(): frozenset()}, {1: "a", "1": "b", 1.5: None}, set(), frozenset({(1, 2)}),
], ids=lambda v: type(v).__name__)  # str() of a 5,000-digit int would fail the id
def test_edge_values_round_trip(value):
    assert same(decode(encode(value)), value)


def test_nan_round_trips_as_nan():
    out = decode(encode([math.nan, complex(math.nan, 1)]))
    assert isinstance(out, list) and math.isnan(out[0]) and math.isnan(out[1].real) and out[1].imag == 1


@pytest.mark.parametrize(("value", "encoded"), [
    (None, ["n"]), (True, ["b", True]), (7, ["i", "7"]), (2**12001, ["h", "2" + "0" * 3000]),  # 2 * 16 ** 3000
    (0.5, ["f", "0.5"]), ("x", ["s", "x"]), (b"hi", ["y", "aGk="]), (1 + 2j, ["c", "1.0", "2.0"]),
    ((1,), ["t", [["i", "1"]]]), ({"k": [None]}, ["d", [[["s", "k"], ["l", [["n"]]]]]]),
], ids=lambda v: type(v).__name__)
def test_each_type_has_its_tag(value, encoded):
    assert encode(value) == encoded


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True


class Count(int):
    pass


@pytest.mark.parametrize("value", [AlwaysEqual(), Count(3), [1, {"k": AlwaysEqual()}], object, print, range(3),
                                   bytearray(b"x")])
def test_what_is_not_plain_data_is_refused(value):
    with pytest.raises(Unencodable):
        encode(value)


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_past_the_limit_is_too_large_both_ways():
    assert decode(encode(nested(MAX_DEPTH - 1))) == nested(MAX_DEPTH - 1)
    with pytest.raises(TooLarge):
        encode(nested(MAX_DEPTH + 1))
    forged: list = ["n"]
    for _ in range(MAX_DEPTH + 1):
        forged = ["l", [forged]]
    with pytest.raises(TooLarge):
        decode(forged)


@pytest.mark.parametrize("forged", [
    [], "n", ["n", 1], ["b", 1], ["i", 5], ["i", "1" * (DECIMAL_DIGITS + 2)], ["f", "1" * 41], ["s", 5],
    ["y", "not base64!"], ["l", "abc"], ["d", [["s", "k"]]], ["d", [[["s", "k"]]]], ["c", "1.0"], ["?", 1],
    ["r", "f"], [1, 2],
])
def test_a_forged_encoding_is_refused(forged):
    with pytest.raises((Unencodable, ValueError)):
        decode(forged)


def test_a_reference_crosses_only_where_it_is_resolved():
    marker = object()
    assert encode([marker], ref=lambda v: "solve" if v is marker else None) == ["l", [["r", "solve"]]]
    assert decode(["r", "solve"], resolve=lambda name: f"<{name}>") == "<solve>"
    with pytest.raises(Unencodable):
        decode(["r", "solve"])
